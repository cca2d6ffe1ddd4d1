"""A refusal that comes after a command has applied its event takes the event back.

No rule of ``ledger.aggregates`` refuses after its effect today, but any check placed after
``trigger_event`` would: its event must neither be stored with the next envelope about the
same run or key (it would enter the log under someone else's receipt) nor be seen by the
group's later checks. The fault is injected into every command (``trigger_event`` applies the
event and then refuses), at hypothesis-chosen calls, and the outcome is compared with the
same script sent without the refused envelopes: the same answers, the same log.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from test_admission import SEED_NAME, World, ingest_seed, world  # noqa: F401 - fixture
from test_admission_property import (
    actions,
    assert_everything_verifies,
    fresh,
    play,
    template,  # noqa: F401 - fixture
)

from domain.errors import DomainError
from ledger.aggregates import Principal, Run
from ledger.audit import audit_ledger
from ledger.history import run_history
from ledger.logged_event import LoggedEvent
from ledger.signing.authoring import attestation_envelope, lifecycle_envelope


class AfterEffectError(DomainError):
    code = "refused-after-effect"


@contextmanager
def refusing_after_effect(calls: set[int]) -> Iterator[list[int]]:
    """Every aggregate's ``trigger_event`` applies its event, then refuses at the calls
    numbered in ``calls`` (counted from 0 while the context is open)."""
    seen = [0]
    originals = {cls: cls.trigger_event for cls in (Run, Principal)}

    def make(original: Any) -> Any:
        def trigger_event(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            n, seen[0] = seen[0], seen[0] + 1
            if n in calls:
                raise AfterEffectError("refused after the event was applied (injected)")

        return trigger_event

    try:
        for cls, original in originals.items():
            cls.trigger_event = make(original)  # type: ignore[method-assign]
        yield seen
    finally:
        for cls, original in originals.items():
            cls.trigger_event = original  # type: ignore[method-assign]


def _log_of(w: Any) -> list[tuple[str, int]]:
    """The log as (event topic, aggregate version) per position: the same whoever's keys."""
    e = w.ledger.store.events.c
    with w.ledger.store.transaction(commit=False) as session:
        rows = session.execute(select(e.topic, e.originator_version).order_by(e.id)).all()
    return [(str(topic), int(version)) for topic, version in rows]


_counter = iter(range(10**9))


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# In groups: one by one, nothing follows a refusal in its group to carry its event.
@given(
    script=actions,
    groups=st.lists(st.integers(2, 8), min_size=1, max_size=6),
    calls=st.sets(st.integers(0, 4), min_size=1, max_size=3),
)
def test_a_refusal_after_the_effect_changes_nothing(
    template: Path,
    tmp_path: Path,
    script: list[tuple[dict[str, Any], str, timedelta]],
    groups: list[int] | None,
    calls: set[int],
) -> None:
    faulty = fresh(template, tmp_path, next(_counter))
    try:
        with refusing_after_effect(calls):
            outcomes = play(faulty, script, groups)  # asserts a refusal appends nothing
        assert_everything_verifies(faulty)
        refused = frozenset(
            i for i, o in enumerate(outcomes) if o.endswith(":refused-after-effect")
        )
        assume(refused)  # an example where no injected refusal fired proves nothing
        reference = fresh(template, tmp_path, next(_counter))
        try:
            expected = play(reference, script, groups, skip=refused)
            assert [o for i, o in enumerate(outcomes) if i not in refused] == expected
            assert _log_of(faulty) == _log_of(reference)
        finally:
            reference.ledger.close()
    finally:
        faulty.ledger.close()


def test_a_refused_attestation_between_two_admitted_ones_is_not_stored(world: World) -> None:
    run = ingest_seed(world)
    now = world.clock.now
    notes = [
        attestation_envelope(run, SEED_NAME, world.attester, type_="note", body=b, now=now)
        for b in ("first", "refused", "third")
    ]
    retract = lifecycle_envelope(run, SEED_NAME, world.admin, action="retract", reason="r", now=now)
    before = world.count()
    # The group's second command (the attestation "refused") and third (the retraction)
    # refuse after applying their events; the retraction is sent again after them.
    with refusing_after_effect({1, 2}):
        results = world.ledger.append_many([notes[0], notes[1], retract, notes[2], retract])
    first, refused, retract_refused, third, retracted = results
    assert isinstance(refused, AfterEffectError) and isinstance(retract_refused, AfterEffectError)
    assert isinstance(first, LoggedEvent) and isinstance(third, LoggedEvent)
    # The second retraction was judged on the run as stored: not "already retracted".
    assert isinstance(retracted, LoggedEvent) and not retracted.duplicate
    assert [first.position, third.position, retracted.position] == [
        before + 1,
        before + 2,
        before + 3,
    ]
    assert world.count() == before + 3
    history = run_history(world.ledger, run)
    assert [h.event for h in history] == [
        "Run.Ingested",
        "Run.Attested",
        "Run.Attested",
        "Run.Retracted",
    ]
    assert all(h.ok for h in history)
    assert audit_ledger(world.ledger).verified
    # The writer's cached run is the stored one: the next append lands at the next version.
    again = world.ledger.append(
        attestation_envelope(run, SEED_NAME, world.attester, type_="note", body="4", now=now)
    )
    assert isinstance(again, LoggedEvent) and again.version == 5


@pytest.mark.parametrize("earlier", [False, True], ids=["alone", "after-another"])
def test_a_refusal_after_the_effect_on_a_cached_run_leaves_it_as_stored(
    world: World,
    earlier: bool,
) -> None:
    """The run comes from the writer's cache: alone in its group, or after an envelope of
    the group that changed it."""
    run = ingest_seed(world)
    now = world.clock.now
    a, b, c = (
        attestation_envelope(run, SEED_NAME, world.attester, type_="note", body=x, now=now)
        for x in "abc"
    )
    world.ledger.append(a)  # the run is now the writer's cached one, at version 2
    group = [c, b] if earlier else [b]
    with refusing_after_effect({len(group) - 1}):
        results = world.ledger.append_many(group)
    assert isinstance(results[-1], AfterEffectError)
    assert world.count() == 5 + earlier  # three keys, the run, a (and c)
    after = world.ledger.append(b)
    assert isinstance(after, LoggedEvent) and not after.duplicate
    assert after.version == 3 + earlier
    assert audit_ledger(world.ledger).verified


def test_a_run_taken_back_while_another_writer_commits_to_it(world: World) -> None:
    """The run is rebuilt as the group read it, not as stored now: another writer's commit
    to it meanwhile makes the group's commit conflict and be admitted again, as any race
    does (rebuilt from a fresh read, it failed the whole group; found by a review)."""
    run = ingest_seed(world)
    now = world.clock.now
    a, b, c, d = (
        attestation_envelope(run, SEED_NAME, world.attester, type_="note", body=x, now=now)
        for x in "abcd"
    )
    other = world.open_ledger()  # another writer (another process, in production)
    original = Run.trigger_event
    refusals = [0]

    def trigger_event(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if kwargs.get("envelope") == b:
            refusals[0] += 1
            if refusals[0] == 1:  # the first time, as another writer commits to the run
                writer = threading.Thread(target=lambda: other.append(c))
                writer.start()
                writer.join()
            raise AfterEffectError("refused after the event was applied (injected)")

    try:
        Run.trigger_event = trigger_event  # type: ignore[method-assign]
        first, refused, last = world.ledger.append_many([a, b, d])
    finally:
        Run.trigger_event = original  # type: ignore[method-assign]
        other.close()
    assert isinstance(first, LoggedEvent) and isinstance(last, LoggedEvent)
    assert isinstance(refused, AfterEffectError)
    assert refusals[0] >= 2  # admitted again after the conflict
    history = run_history(world.ledger, run)
    assert [h.event for h in history].count("Run.Attested") == 3  # c, a, d
    assert all(h.ok for h in history)
    assert audit_ledger(world.ledger).verified


@pytest.mark.parametrize("failure", [RuntimeError, AfterEffectError], ids=["a-bug", "a-refusal"])
def test_an_event_whose_apply_fails_leaves_no_trace(
    world: World, monkeypatch: pytest.MonkeyPatch, failure: type[Exception]
) -> None:
    """An event's apply that raises (no event pending; a bug, or a refusal misplaced into
    it): the envelope is refused, and sent again later it is stored, not answered with
    another event's receipt as a duplicate (found by a review: the envelope index was
    written before the apply). A refusal raised half-way through an apply, after it changed
    the run, is not covered: no apply refuses, and every apply is one assignment."""
    run = ingest_seed(world)
    now = world.clock.now
    x, y, warm = (
        attestation_envelope(run, SEED_NAME, world.attester, type_="note", body=b, now=now)
        for b in ("x", "y", "warm")
    )
    assert isinstance(world.ledger.append(warm), LoggedEvent)  # the run is the writer's cached one
    original = Run.Attested.apply_to
    failures = [1]

    def apply_to(self: Any, aggregate: Any) -> None:
        if failures and self.envelope == x:
            failures.pop()
            raise failure("raised by the apply")
        original(self, aggregate)

    monkeypatch.setattr(Run.Attested, "apply_to", apply_to)
    (refused,) = world.ledger.append_many([x])
    assert isinstance(refused, DomainError)
    other = world.ledger.append(y)
    again = world.ledger.append(x)
    assert not again.duplicate and again.position == other.position + 1
    assert again.version == other.version + 1
    assert audit_ledger(world.ledger).verified
