"""The writer's transcoder (``ledger.store.lean_transcoder``) stores the very bytes eventsourcing's
``JSONTranscoder`` stores, or refuses what it refuses: every code point, every state the ledger
makes, and a property over JSON values, floats, subclasses and unregistered types included."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

import pytest
from eventsourcing.persistence import (
    DatetimeAsISO,
    DecimalAsStr,
    JSONTranscoder,
    Transcoder,
    UUIDAsHex,
)
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

from ledger.store.lean_transcoder import LeanJSONTranscoder
from tests.ledger.test_admission import World, ingest_seed, world  # noqa: F401


def _pair(world: World) -> tuple[Transcoder, Transcoder]:
    """The ledger's writing transcoder and a standard one with the same transcodings."""
    lean = world.ledger.mapper.transcoder
    assert type(lean) is LeanJSONTranscoder
    standard = JSONTranscoder()
    for transcoding in lean.types.values():
        standard.register(transcoding)
    return lean, standard


def _same(lean: Transcoder, standard: Transcoder, state: Any) -> None:
    try:
        expected: bytes | type[BaseException] = standard.encode(state)
    except Exception as exc:
        with pytest.raises(type(exc)):
            lean.encode(state)
        return
    assert lean.encode(state) == expected


def test_every_code_point_is_written_alike(world: World) -> None:
    lean, standard = _pair(world)
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    state = {"text": text, "keys": {text[:300]: [text[-300:], 0, -1, True, False, None]}}
    assert lean._shaped(state) is not None  # type: ignore[attr-defined]  # msgspec's road
    _same(lean, standard, state)


def test_a_lone_surrogate_is_refused_alike(world: World) -> None:
    lean, standard = _pair(world)
    _same(lean, standard, {"text": "a\ud800b"})
    _same(lean, standard, {"a\udfffb": "text"})
    _same(lean, standard, {"deep": {"list": ["a", {"b": "\ud800"}]}})


def test_the_ledgers_stored_states_are_written_alike(world: World) -> None:
    """Every event the admission tests' world stored (keys, an ingestion): the state as the
    mapper hands it over, datetime and ids not yet transcoded."""
    ingest_seed(world)
    lean, standard = _pair(world)
    events = world.ledger.store.events
    with world.ledger.store.transaction(commit=False) as session:
        states = [bytes(r[0]) for r in session.execute(select(events.c.state))]
    assert len(states) >= 4
    for stored in states:
        state = lean.decode(stored)  # as the event's fields were: datetime, ids transcoded
        assert lean.encode(state) == standard.encode(state) == stored


class _Colour(StrEnum):
    RED = "red"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=True),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
_odd = st.sampled_from(
    [
        datetime(2026, 12, 7, 5, 0, tzinfo=UTC),
        uuid.UUID(int=7),
        Decimal("1.5"),
        _Colour.RED,
        (1, "a"),
        {1: "int key"},
        {"a", "b"},
        b"bytes",
        1.0,
        float("nan"),
        2**70,
    ]
)


@given(st.dictionaries(st.text(), _json | _odd, max_size=6))
def test_any_state_is_written_alike_or_refused_alike(state: dict[str, Any]) -> None:
    lean = LeanJSONTranscoder()
    standard = JSONTranscoder()
    for transcoder in (lean, standard):  # eventsourcing's own, as an Application has them
        for transcoding in (UUIDAsHex(), DecimalAsStr(), DatetimeAsISO()):
            transcoder.register(transcoding)
    _same(lean, standard, state)
    _same(lean, standard, [state])  # not a dict: the standard road
