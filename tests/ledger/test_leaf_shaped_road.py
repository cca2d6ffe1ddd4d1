"""``LogEntry.shaped_leaf_hash`` (the worker line's leaf, its envelope's types proved by the
decoder) is ``leaf_hash`` or None for every envelope of ``DSSE_SHAPED``'s types (its
precondition: the method does not check the envelope's types); and a worker's line proved in a
one-leaf tree is included exactly when the reference road's leaf is that tree's."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import DomainError
from ledger.proofs.hasher import leaf_hash
from ledger.proofs.log_entries import DSSE_SHAPED, LogEntry
from ledger.verification_report import Check, Report
from ledger.verify.batches import Batch, verify_batch
from ledger.verify.events import NOT_READ, EventContext, read_worker_event

AGGREGATE = "06682dfb-1097-5809-8024-85d58b7925c2"
# Odd strings: a lone surrogate, NUL, non-ASCII, and two keys that sort apart by code
# point and by UTF-16 unit ("\U0001d11e" < "\ue000" in UTF-16, not by code point).
odd = st.sampled_from(["\ud800", "\x00", "é", "\u2028", 'a\\"b', "\U0001d11e", "\ue000"])
texts = st.text(max_size=5) | odd
keys = odd | texts | st.sampled_from(["payload", "payloadType", "signatures", "keyid", "sig"])
envelopes = st.dictionaries(
    keys, texts | st.lists(st.dictionaries(keys, texts, max_size=3), max_size=2), max_size=4
)
ints = st.integers(-(2**60), 2**60) | st.sampled_from([2**53 - 1, 2**53, -(2**53)])


def _reference(entry: LogEntry) -> bytes | None:
    try:
        return entry.leaf_hash()
    except DomainError:
        return None


@settings(max_examples=400, deadline=None)
@given(ints, texts, ints, texts, envelopes, texts)
def test_the_shaped_leaf_is_the_leaf_or_none(
    position: int, aggregate: str, version: int, topic: str, envelope: Any, received: str
) -> None:
    entry = LogEntry(position, aggregate, version, topic, envelope, received)
    shaped = entry.shaped_leaf_hash()
    assert shaped is None or shaped == _reference(entry)


def test_the_exporters_entry_takes_the_road() -> None:
    envelope = {"payload": "cA==", "payloadType": "t", "signatures": [{"keyid": "k", "sig": "s"}]}
    entry = LogEntry(4, AGGREGATE, 1, "ledger.aggregates:Run.Ingested", envelope, "2026-12-07Z")
    assert entry.shaped_leaf_hash() == entry.leaf_hash()
    assert msgspec.convert(envelope, DSSE_SHAPED, strict=True) == envelope
    for odd in ({**envelope, "é": "x"}, {**envelope, "payload": "\ud800"}):
        assert LogEntry(4, AGGREGATE, 1, "t", odd, "r").shaped_leaf_hash() is None


@settings(max_examples=300, deadline=None)
@given(envelopes | st.dictionaries(keys, st.integers() | st.none(), max_size=2), st.booleans())
def test_a_worker_line_is_included_as_the_reference_road_says(
    envelope: Any, same_tree: bool
) -> None:
    """The tree holds the reference leaf (or another): the line's inclusion holds exactly as
    the reference road's would, so a wrong shaped leaf fails here."""
    record = {
        "type": "event",
        "leafIndex": 0,
        "position": 4,
        "aggregate": AGGREGATE,
        "version": 1,
        "topic": "ledger.aggregates:Run.Ingested",
        "receivedAt": "2026-12-07T12:06:23.271Z",
        "envelope": envelope,
        "proof": [],
    }
    try:
        line = json.dumps(record)
    except UnicodeEncodeError:  # pragma: no cover - json.dumps escapes surrogates
        return
    entry = LogEntry(4, AGGREGATE, 1, record["topic"], envelope, record["receivedAt"])
    reference = _reference(entry)
    root = reference if reference is not None and same_tree else b"\x01" * 32
    context = EventContext((1, root), None)
    report = verify_batch(Batch(context, [(1, line)])).report
    event = read_worker_event("line 1", line, Report("r"))
    expected = reference is not None and same_tree
    assert (report.passed[Check.INCLUSION] == 1) is expected
    if event is not None and event is not NOT_READ and event.leaf is not None:
        assert event.leaf == reference
        assert event.leaf == leaf_hash(entry.data())
