"""The writer reuses a run it committed last without reloading it, but only while the
store still holds that version: another process's events are seen, a group that failed to
commit leaves nothing behind. On SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.demo import build_demo
from domain.statements import Role
from ledger.admission import Admission
from ledger.aggregates import run_id
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.logged_event import LoggedEvent
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.keys import SigningKey
from tests.projections.projection_world import MANIFESTS, RUN_21613

NAME = "sol-submission-38823"


@pytest.fixture
def two_writers(db_url: str, tmp_path: Path) -> Iterator[tuple[Ledger, Ledger, str, SigningKey]]:
    home = LedgerHome.at(tmp_path / "home", db_url)
    first, seed = build_demo(home)
    second = home.open()  # another process, as far as the store can tell
    key = SigningKey.generate()
    first.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
    yield first, second, seed, key
    first.close()
    second.close()


def _note(seed: str, key: SigningKey, body: str) -> dict[str, Any]:
    return attestation_envelope(seed, NAME, key, type_="note", body=body)


def test_events_written_by_another_writer_are_seen(two_writers: Any) -> None:
    first, second, seed, key = two_writers
    a = first.append_many([_note(seed, key, "a")])[0]  # first now holds the run, cached
    b_envelope = _note(seed, key, "b")
    b = second.append(b_envelope)  # behind first's back
    again = first.append_many([b_envelope, _note(seed, key, "c")])
    assert not isinstance(a, Exception) and not isinstance(again[1], Exception)
    assert again[0].duplicate and again[0].position == b.position  # type: ignore[union-attr]
    assert again[1].version == b.version + 1  # type: ignore[union-attr]
    history = [r.version for r in first.stored_records(again[1].aggregate_id)]  # type: ignore[union-attr]
    assert history == sorted(set(history))  # one event per version, none lost


def test_a_group_that_failed_to_commit_leaves_no_trace(
    two_writers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _, seed, key = two_writers
    first.append_many([_note(seed, key, "warm")])

    def broken(*_: Any) -> Any:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(first, "_commit", broken)
    with pytest.raises(RuntimeError):
        first.append_many([_note(seed, key, "lost")])
    monkeypatch.undo()
    # Had the uncommitted attestation stayed in the cached run, "lost" would now be called
    # a duplicate of an event that does not exist.
    retry = first.append_many([_note(seed, key, "lost")])[0]
    assert not isinstance(retry, Exception) and retry.duplicate is False


def test_a_run_another_writer_ingests_after_the_group_looked_is_not_ingested_twice(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Admission takes a run its version query did not find as new, without loading it; if
    another writer stores that run before the group commits, the commit conflicts and the
    group is admitted again, against the stored run: one ingestion, a duplicate's receipt."""
    home = LedgerHome.at(tmp_path / "home", db_url)
    first = home.initialise(origin="test.kernelindex/race")
    second = home.open()
    try:
        envelope = ingestion_envelope(MANIFESTS[RUN_21613], home.key("ingester"))
        read_versions = Admission._read_versions
        raced: list[LoggedEvent] = []

        def then_another_writer(self: Admission, *args: Any) -> None:
            read_versions(self, *args)
            if self is first.admission and not raced:  # the first's first look loses
                # Another writer, on a thread of its own (as another process would be: its
                # transaction is its own, not the one this admission reads in).
                other = threading.Thread(target=lambda: raced.append(second.append(envelope)))
                other.start()
                other.join()

        monkeypatch.setattr(Admission, "_read_versions", then_another_writer)
        answer = first.append_many([envelope])[0]
        assert not isinstance(answer, Exception)
        assert answer.duplicate and answer.position == raced[0].position
        ingested = first.stored_records(run_id(RUN_21613))
        assert [r.event_name for r in ingested] == ["Run.Ingested"]
    finally:
        first.close()
        second.close()


def test_a_group_that_keeps_losing_races_is_admitted_under_the_lock(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each optimistic admission loses to another writer's commit to the same run; after
    ``LOCKED_AFTER`` lost races the group is admitted holding the event table's lock, where
    nobody can overtake it: it is stored, once, after the others' events."""
    from ledger.application import LOCKED_AFTER

    home = LedgerHome.at(tmp_path / "home", db_url)
    first, seed = build_demo(home)
    second = home.open()
    try:
        key = SigningKey.generate()
        first.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
        looks: list[int] = []
        locks: list[int] = []
        hold = type(first.store).hold_write_lock
        commit = Ledger._commit

        def counted_lock(self: Any, session: Any) -> None:
            locks.append(1)
            hold(self, session)

        def overtaken(self: Ledger, *args: Any) -> Any:
            if self is first:
                looks.append(1)
                if not locks:  # admitted optimistically: another writer commits first
                    body = f"overtakes {len(looks)}"
                    other = threading.Thread(target=lambda: second.append(_note(seed, key, body)))
                    other.start()
                    other.join()
            return commit(self, *args)

        monkeypatch.setattr(Ledger, "_commit", overtaken)
        monkeypatch.setattr(type(first.store), "hold_write_lock", counted_lock)
        answer = first.append_many([_note(seed, key, "the loser")])[0]
        assert not isinstance(answer, Exception) and not answer.duplicate
        assert len(looks) == LOCKED_AFTER + 1 and len(locks) == 1
        events = first.stored_records(answer.aggregate_id)
        assert events[-1].position == answer.position  # after every overtaking event
        assert [r.version for r in events] == list(range(1, len(events) + 1))
    finally:
        first.close()
        second.close()
