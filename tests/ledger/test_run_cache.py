"""The writer reuses a run it committed last without reloading it, but only while the
store still holds that version: another process's events are seen, a group that failed to
commit leaves nothing behind. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.demo import build_demo
from domain.statements import Role
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.keys import SigningKey

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
