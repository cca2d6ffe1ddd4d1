"""A database that goes back under a running writer: a backup restored, or a failover to a
standby that lacked the last commits, with the ledger's processes left running. Its caches
(runs and keys by version, the tree by size) were filled from commits the database no longer
holds, and versions and sizes come back under other content. Each writer notices, drops
them, and decides as a fresh ledger would (found by an attack review of the caches), on
SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import delete, func, select
from test_admission import SEED_NAME, SEED_RUN, World, ingest_seed, world  # noqa: F401 - fixture

from domain.errors import DomainError
from domain.statements import Role
from ledger.application import Ledger
from ledger.audit import audit_ledger
from ledger.errors import WrongRoleError
from ledger.history import run_history
from ledger.logged_event import LoggedEvent
from ledger.signing.authoring import (
    attestation_envelope,
    key_registration_envelope,
    lifecycle_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.store.fold_fields import event_fold_fields
from ledger.store.transparency_log import leaves, nodes

Snapshot = tuple[int, int, set[tuple[int, int]]]


def _snapshot(ledger: Ledger) -> Snapshot:
    e = ledger.store.events.c
    with ledger.store.transaction(commit=False) as session:
        return (
            int(session.execute(select(func.max(e.id))).scalar() or 0),
            int(session.execute(select(func.max(leaves.c.leaf_index))).scalar() or -1),
            {(int(lv), int(ix)) for lv, ix in session.execute(select(nodes.c.level, nodes.c.idx))},
        )


def _lose_since(ledger: Ledger, before: Snapshot) -> None:
    """The database goes back to ``before``: what was committed since is gone."""
    events = ledger.store.events
    with ledger.store.transaction(commit=True) as session:
        session.execute(delete(events).where(events.c.id > before[0]))
        # The events' fold fields go back with them (a restored database holds none newer).
        session.execute(delete(event_fold_fields).where(event_fold_fields.c.position > before[0]))
        session.execute(delete(leaves).where(leaves.c.leaf_index > before[1]))
        now = {(int(lv), int(ix)) for lv, ix in session.execute(select(nodes.c.level, nodes.c.idx))}
        for level, index in now - before[2]:
            session.execute(delete(nodes).where((nodes.c.level == level) & (nodes.c.idx == index)))


def _admin_that_superseded(w: World, key: SigningKey) -> Snapshot:
    """``key`` registered as an admin and used once (the seed run superseded): the writer
    holds it as an admin, at version 1. The database as it was before, to go back to."""
    before = _snapshot(w.ledger)
    w.ledger.append(key_registration_envelope(key.public, [Role.ADMIN], w.admin, now=w.clock.now))
    w.ledger.append(
        lifecycle_envelope(
            SEED_RUN, SEED_NAME, key, action="supersede", reason="once", now=w.clock.now
        )
    )
    return before


def _note(w: World, body: str) -> dict[str, Any]:
    return attestation_envelope(
        SEED_RUN, SEED_NAME, w.attester, type_="note", body=body, now=w.clock.now
    )


def test_a_lost_commit_is_not_taken_for_stored_and_the_log_stays_whole(world: World) -> None:
    ingest_seed(world)
    a, b = world.ledger, world.open_ledger()
    try:
        before = _snapshot(a)
        lost = _note(world, "lost in the failover")
        first = a.append(lost)
        _lose_since(a, before)
        # Another writer brings the run's version and the tree's size back, with other content.
        other = b.append(_note(world, "written after the failover"))
        assert other.version == first.version
        assert other.inclusion is not None and first.inclusion is not None
        assert other.inclusion.leaf_index == first.inclusion.leaf_index
        again = a.append(lost)  # sent again, as a receipt-less client is told to
        assert not again.duplicate and again.envelope_digest == first.envelope_digest
        assert again.position != other.position
        assert isinstance(a.append(_note(world, "and one more")), LoggedEvent)
        assert b.append(lost).duplicate  # the other writer agrees
        report = audit_ledger(world.open_ledger())
        assert report.verified, report.to_json()["findings"]
    finally:
        b.close()


def test_a_key_lost_with_its_commit_does_not_sign_with_its_old_role(world: World) -> None:
    ingest_seed(world)
    a, b = world.ledger, world.open_ledger()
    key = SigningKey.generate()
    try:
        before = _admin_that_superseded(world, key)
        _lose_since(a, before)
        world.clock.advance(seconds=1)
        # Its holder registers it again, as an attester: version 1 once more.
        b.append(key_registration_envelope(key.public, [Role.ATTESTER], key, now=world.clock.now))
        retract = lifecycle_envelope(
            SEED_RUN, SEED_NAME, key, action="retract", reason="an attester's", now=world.clock.now
        )
        refusals: list[DomainError] = []
        for ledger in (world.open_ledger(), a):  # a fresh ledger, then the writer with caches
            try:
                ledger.append(retract)
            except DomainError as exc:
                refusals.append(exc)
        assert [type(r) for r in refusals] == [WrongRoleError, WrongRoleError]
        assert audit_ledger(world.open_ledger()).verified
    finally:
        b.close()


def test_a_reader_does_not_judge_with_a_key_lost_with_its_commit(world: World) -> None:
    """A reader's key states are cached by version too: after the database went back, a
    key registered again with other roles at the same version is read afresh, so history
    judges its holder's events by the roles the log now holds (an attester's attestation
    is not failed for coming from an admin)."""
    ingest_seed(world)
    a, reader = world.ledger, world.open_ledger()
    key = SigningKey.generate()
    try:
        before = _admin_that_superseded(world, key)
        # The reader verifies the supersession: it holds the key as an admin, at version 1.
        assert [(h.event, h.ok) for h in run_history(reader, SEED_RUN)][-1] == (
            "Run.Superseded",
            True,
        )
        _lose_since(a, before)
        world.clock.advance(seconds=1)
        a.append(key_registration_envelope(key.public, [Role.ATTESTER], key, now=world.clock.now))
        a.append(
            attestation_envelope(
                SEED_RUN, SEED_NAME, key, type_="note", body="after", now=world.clock.now
            )
        )
        for ledger in (world.open_ledger(), reader):  # a fresh reader, then the one with caches
            history = run_history(ledger, SEED_RUN)
            assert [(h.event, h.ok) for h in history] == [
                ("Run.Ingested", True),
                ("Run.Attested", True),
            ], [h.to_json() for h in history if not h.ok]
    finally:
        reader.close()


def test_a_reader_that_read_before_the_log_went_back_does_not_fill_the_cache(
    world: World,
) -> None:
    """Reader threads race: one reads a key's state, the database goes back, another reader
    notices and drops the cache; the first must not then put what it read into it, or the
    lost roles would be reused for good (found by a review)."""
    ingest_seed(world)
    a, reader = world.ledger, world.open_ledger()
    key = SigningKey.generate()
    try:
        before = _admin_that_superseded(world, key)
        real = reader.key_states
        paused, resume = threading.Event(), threading.Event()

        def key_states(key_ids: Any) -> Any:
            found = real(key_ids)
            if threading.current_thread().name == "first" and not paused.is_set():
                paused.set()  # read before the database goes back, then descheduled
                resume.wait(10)
            return found

        reader.key_states = key_states  # type: ignore[method-assign]
        first = threading.Thread(target=lambda: run_history(reader, SEED_RUN), name="first")
        first.start()
        assert paused.wait(10)
        _lose_since(a, before)
        assert [h.event for h in run_history(reader, SEED_RUN)] == ["Run.Ingested"]
        resume.set()
        first.join()
        world.clock.advance(seconds=1)
        a.append(key_registration_envelope(key.public, [Role.ATTESTER], key, now=world.clock.now))
        a.append(
            attestation_envelope(
                SEED_RUN, SEED_NAME, key, type_="note", body="after", now=world.clock.now
            )
        )
        assert [(h.event, h.ok) for h in run_history(reader, SEED_RUN)] == [
            ("Run.Ingested", True),
            ("Run.Attested", True),
        ]
    finally:
        reader.close()
