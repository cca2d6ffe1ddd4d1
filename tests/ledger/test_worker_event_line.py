"""A worker's event line read into ``_EventLine`` (``read_worker_event``) verifies exactly as
the line read whole (``read_line``, then ``parse_event``): same findings, counts and what the
merge is given, for lines of any fields, types, repeats and spellings."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger.verify.batches as batches
from ledger.verification_report import Report
from ledger.verify.batches import Batch, verify_batch
from ledger.verify.events import NOT_READ, EventContext, read_worker_event

FIELDS = ["type", "leafIndex", "position", "aggregate", "version", "topic", "receivedAt"]
FIELDS += ["envelope", "proof"]
AGGREGATE = "06682dfb-1097-5809-8024-85d58b7925c2"
GOOD: dict[str, Any] = {
    "type": "event",
    "leafIndex": 3,
    "position": 4,
    "aggregate": AGGREGATE,
    "version": 1,
    "topic": "ledger.aggregates:Run.Ingested",
    "receivedAt": "2026-12-07T12:06:23.271Z",
    "envelope": {"payloadType": "t", "payload": "cA==", "signatures": [{"keyid": "k", "sig": "s"}]},
    "proof": ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "not base64"],
}
scalars = (
    st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
    | st.none()
    | st.text(max_size=6)
    | st.sampled_from(["event", "claim", AGGREGATE, AGGREGATE.upper(), "x:Principal.Revoked"])
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner)
)
# A member as written: the value's JSON, or a spelling read_line refuses or reads apart.
spellings = st.sampled_from(["1.0", "1e2", "-0", "1e999", '"\\ud800"', '"\\u00e9"', "tru"])
members = st.tuples(
    st.sampled_from([*FIELDS, "extra", "leafindex"]),
    values.map(json.dumps) | spellings | st.sampled_from(FIELDS).map(lambda f: json.dumps(GOOD[f])),
)


def _line(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in pairs) + "}"


def good_lines() -> st.SearchStrategy[str]:
    """Lines of the exporter's fields, some changed, dropped, repeated or added to."""
    base = st.just([(k, json.dumps(v)) for k, v in GOOD.items()])
    return st.tuples(base, st.lists(members, max_size=3), st.integers(0, 9), st.booleans()).map(
        lambda t: _line(([p for i, p in enumerate(t[0]) if i != t[2]] if t[3] else t[0]) + t[1])
    )


lines = good_lines() | st.lists(members, max_size=10).map(_line) | st.text(max_size=20)
contexts = st.sampled_from([EventContext(None, None), EventContext((5, b"\x00" * 32), None)])


def _as_built(out: batches.BatchResult) -> Any:
    return msgspec.to_builtins(out)


@settings(max_examples=500, deadline=None)
@given(st.lists(lines, min_size=1, max_size=4), contexts)
def test_a_worker_reads_its_lines_as_the_reference_road(
    texts: list[str], context: EventContext
) -> None:
    batch = Batch(context, list(enumerate(texts, start=1)))
    fast = _as_built(verify_batch(batch))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batches, "read_worker_event", lambda *_: NOT_READ)
        reference = _as_built(verify_batch(batch))
    assert fast == reference


def test_the_exporters_line_takes_the_road() -> None:
    line = json.dumps(GOOD, separators=(",", ":"))
    event = read_worker_event("line 1", line, Report("r"))
    assert event is not NOT_READ and event is None  # its proof's second hash is refused
    good = dict(GOOD, proof=GOOD["proof"][:1])
    event = read_worker_event("line 1", json.dumps(good), Report("r"))
    assert event is not None and event is not NOT_READ
    assert (event.leaf_index, event.entry.position, event.entry.envelope) == (
        3,
        4,
        GOOD["envelope"],
    )
    # and its leaf is made on the shaped road, equal to the reference leaf
    assert event.leaf is not None and event.leaf == event.entry.leaf_hash()
    for other in ({**good, "type": "claim"}, {**good, "topic": "x:Principal.Registered"}):
        assert read_worker_event("line 1", json.dumps(other), Report("r")) is NOT_READ
