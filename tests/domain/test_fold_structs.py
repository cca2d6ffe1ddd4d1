"""The fold's records are msgspec Structs (issue 33: a class costs ~12 us to create at import
instead of a dataclass's ~0.6 ms): they keep what the dataclasses gave their users. A frozen
one refuses assignment and hashes by value, equal values make equal records, a record
pickles to an equal one (fold workers send them between processes), and the checks of
``__post_init__`` run on construction and on ``structs.replace`` alike."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import structs

from domain.evidence import (
    EvidenceLevel,
    EvidencePolicyError,
    EvidenceState,
    IngestionFacts,
    LifecycleFacts,
    RerunFacts,
)
from domain.ranking import RankedEntry, RankEntry, View
from ledger.authority import KeyState
from ledger.signing.keys import PublicKey, SigningKey

claims = st.none() | st.floats(min_value=1e-3, max_value=1e12) | st.integers(1, 10**12)


@st.composite
def ingestions(draw: st.DrawFn) -> IngestionFacts:
    return IngestionFacts(
        position=draw(st.integers(1, 10**6)),
        status=draw(st.sampled_from(["passed", "failed"])),
        has_pinned_source=draw(st.booleans()),
        has_raw_evidence=draw(st.booleans()),
        product=draw(st.none() | st.sampled_from(["B200", "H100"])),
        architecture=draw(st.none() | st.sampled_from(["sm_100", "sm_90"])),
        primary_statistic=draw(st.none() | st.sampled_from(["mean", "median"])),
        claimed_ns=draw(claims),
    )


def _same_record(record: Any) -> None:
    copy = type(record)(**structs.asdict(record))
    assert copy == record and copy is not record
    assert pickle.loads(pickle.dumps(record)) == record
    assert repr(copy) == repr(record)


@settings(max_examples=200, deadline=None)
@given(ingestions(), st.integers(1, 10**6), st.booleans())
def test_frozen_records_are_values(facts: IngestionFacts, later: int, accepted: bool) -> None:
    state = EvidenceState.start(facts)
    rerun = RerunFacts(
        facts.position + later,
        "sha256:" + "a" * 64,
        "gpu",
        "B200",
        "sm_100",
        True,
        10.0,
        (9.0, 11.0),
        accepted,
    )
    moved = state.apply(rerun)
    entry = RankEntry(
        "sha256:" + "b" * 64, "key", facts.status, facts.claimed_ns, moved.result.level
    )
    ranked = RankedEntry(entry.run, 1, 1, 1.0, (), View.SOURCE_NATIVE)
    for record in (facts, rerun, state, moved, moved.result, entry, ranked):
        _same_record(record)
        assert hash(record) == hash(type(record)(**structs.asdict(record)))
        first = structs.fields(record)[0].name
        with pytest.raises(AttributeError, match="immutable"):
            setattr(record, first, None)
    assert {facts, facts} == {facts}


def test_the_checks_run_on_construction_and_on_replace() -> None:
    facts = IngestionFacts(1, "passed", True, True, "B200", "sm_100", "mean", 12.0)
    for bad in (-1.0, float("nan"), True):
        with pytest.raises(EvidencePolicyError, match="claimed_ns"):
            IngestionFacts(1, "passed", True, True, "B200", "sm_100", "mean", bad)
        with pytest.raises(EvidencePolicyError, match="claimed_ns"):
            structs.replace(facts, claimed_ns=bad)
    with pytest.raises(EvidencePolicyError, match="ci95_ns"):
        RerunFacts(2, "k", "g", "B200", "sm_100", True, 10.0, (11.0, 9.0), True)
    assert structs.replace(facts, claimed_ns=None).claimed_ns is None
    assert LifecycleFacts(3, "retract").reason == ""  # defaults kept
    assert RankEntry("r", "k", "passed", 1.0).level is EvidenceLevel.REPORTED


def test_a_key_state_and_its_public_key_pickle_without_the_loaded_key() -> None:
    signer = SigningKey.generate()
    key = signer.public
    assert key.verify(signer.sign(b"m"), b"m")  # loads and caches the key object
    assert key.key_id == signer.key_id
    now = datetime(2026, 12, 6, tzinfo=UTC)
    state = KeyState(key.key_id, key, frozenset(), now, None, now, 3, devices=frozenset())
    back = pickle.loads(pickle.dumps(state))
    assert back == state and hash(back) == hash(state)
    assert back.public_key.verify(signer.sign(b"m"), b"m")
    revoked = structs.replace(state, revoked_at=now, revoked_position=9, version=2)
    assert revoked.revoked and revoked.revoked_before(10) and not state.revoked
    with pytest.raises(ValueError, match="32 bytes"):
        PublicKey(b"short")
    with pytest.raises(AttributeError):
        key.raw = b"x" * 32  # type: ignore[misc]
