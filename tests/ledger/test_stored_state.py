"""A stored event's fields read without eventsourcing (``ledger.store.stored_events
.stored_fields``: a run's manifests and the key book on the driver's door, issue 33) refuse
exactly what the ledger's own mapper refuses: its transcoder's names are the ledger's, and a
sweep of damaged states fails alike on both readers (review MEDIUM: a plain JSON read
answered where the mapper's replay failed closed)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.store import stored_events
from ledger.store.stored_events import stored_fields
from tests.ledger.test_admission import World, world  # noqa: F401


def test_the_transcodings_are_the_ledger_mappers(world: World) -> None:
    assert set(stored_events._TRANSCODINGS) == set(world.ledger.mapper.transcoder.names)


def _mapper_reads(world: World, state: bytes) -> bool:
    try:
        world.ledger.mapper.transcoder.decode(state)
    except Exception:
        return False
    return True


def _we_read(state: bytes) -> bool:
    try:
        stored_fields(state)
    except (ValueError, RecursionError):
        return False
    return True


KINDS = st.sampled_from(["uuid_hex", "decimal_str", "datetime_iso", "pickle", "", "UUID_HEX"])
DATA = st.one_of(
    st.sampled_from(
        [
            "0" * 32,
            "12345678-1234-5678-1234-567812345678",
            "1.5",
            "NaN",
            "x",
            "2026-12-07T03:00:00+00:00",
            "2026-13-07",
        ]
    ),
    st.integers(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


# The world's mapper only decodes (it holds no state between examples).
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kind=KINDS, data=DATA, where=st.sampled_from(["timestamp", "received_at", "deep"]))
def test_a_transcoded_value_reads_alike_with_and_without_the_mapper(
    world: World, kind: str, data: Any, where: str
) -> None:
    value = {"_type_": kind, "_data_": data}
    fields: dict[str, Any] = {"received_at": "2026-12-07T03:00:00Z", "envelope": {}}
    if where == "deep":
        fields["envelope"] = {"signatures": [{"extra": value}]}
    else:
        fields[where] = value
    state = json.dumps(fields).encode()
    assert _we_read(state) == _mapper_reads(world, state), state


@pytest.mark.parametrize(
    "state",
    [b"\xff{}", b"[1]", b"{", b'{"a": NaN}', b'{"_type_": "datetime_iso"}'],
    ids=["not utf-8", "not an object", "truncated", "NaN", "one key only"],
)
def test_states_read_alike_at_the_edges(world: World, state: bytes) -> None:
    mapper = _mapper_reads(world, state)
    ours = _we_read(state)
    # Our reader also wants an object (a stored event is one); else, as the mapper.
    assert ours == (mapper and state.lstrip().startswith(b"{")), state
