"""A log leaf's data by the DSSE-shaped road (``LogEntry._plain_data``) is ``canonical_json``
of the entry, byte for byte, and every entry it does not take (or that ``canonical_json``
refuses) is answered by ``canonical_json`` itself."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.canonical import canonical_json
from domain.errors import DomainError
from ledger.proofs.log_entries import LogEntry

# Keys and strings with what JCS treats apart: non-ASCII, controls, NUL, lone surrogates.
texts = st.text(st.characters(), max_size=8) | st.sampled_from(
    ["keyid", "sig", "payload", "payloadType", "signatures", "\x00", "\ud800", "é", "😀"]
)
scalars = (
    texts
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | st.none()
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3)
)
signatures = st.lists(st.dictionaries(texts, texts | scalars, max_size=3), max_size=3)
envelopes = st.dictionaries(texts, texts | signatures | values, max_size=4)
numbers = st.integers(-(2**54), 2**54) | st.sampled_from([2**53 - 1, 2**53, -(2**53)])


def _reference(entry: LogEntry) -> bytes | str:
    try:
        return canonical_json(
            {
                "position": entry.position,
                "aggregate": entry.aggregate,
                "version": entry.version,
                "topic": entry.topic,
                "envelope": entry.envelope,
                "receivedAt": entry.received_at,
            }
        )
    except DomainError as exc:
        return f"{type(exc).__name__}: {exc}"


def _data(entry: LogEntry) -> bytes | str:
    try:
        return entry.data()
    except DomainError as exc:
        return f"{type(exc).__name__}: {exc}"


@settings(max_examples=600, deadline=None)
@given(numbers, texts, numbers, texts, envelopes | values, texts)
def test_data_is_canonical_json_of_the_entry(
    position: int, aggregate: str, version: int, topic: str, envelope: Any, received: str
) -> None:
    entry = LogEntry(position, aggregate, version, topic, envelope, received)
    assert _data(entry) == _reference(entry)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 2**53 - 1),
    texts,
    st.integers(0, 2**53 - 1),
    texts,
    texts,
    texts,
    st.lists(st.fixed_dictionaries({"keyid": texts, "sig": texts}), max_size=2),
    texts,
)
def test_a_dsse_envelope_takes_the_road_to_the_same_bytes(
    position: int,
    aggregate: str,
    version: int,
    topic: str,
    payload_type: str,
    payload: str,
    signatures: list[dict[str, str]],
    received: str,
) -> None:
    envelope = {"payloadType": payload_type, "payload": payload, "signatures": signatures}
    entry = LogEntry(position, aggregate, version, topic, envelope, received)
    strings = [aggregate, topic, payload_type, payload, received]
    strings += [text for signature in signatures for item in signature.items() for text in item]
    surrogate = any("\ud800" <= c <= "\udfff" for text in strings for c in text)
    fast = entry._plain_data()
    assert (fast is None) == surrogate  # taken unless the encoder refuses the text
    assert _data(entry) == _reference(entry)
    if fast is not None:
        assert fast == _reference(entry)


def test_the_road_leaves_what_it_does_not_know() -> None:
    plain = {"payloadType": "t", "payload": "p", "signatures": [{"keyid": "k", "sig": "s"}]}
    envelopes: tuple[dict[Any, Any], ...] = (
        {**plain, "n": 1},  # an integer: the general walk judges its range
        {**plain, "signatures": [{"keyid": "k", "sig": 1.5}]},
        {**plain, "é": "x"},  # a non-ASCII key: UTF-16 order is rfc8785's
        {**plain, "signatures": [["k"]]},
        {**plain, "signatures": "s", 1: "x"},
    )
    for envelope in envelopes:
        entry = LogEntry(1, "a", 1, "t", envelope, "r")
        assert entry._plain_data() is None
        assert _data(entry) == _reference(entry)
    assert LogEntry(2**53, "a", 1, "t", plain, "r")._plain_data() is None
    assert LogEntry(True, "a", 1, "t", plain, "r")._plain_data() is None
    assert LogEntry(1, "a", 1, "t", plain, "r")._plain_data() == _reference(
        LogEntry(1, "a", 1, "t", plain, "r")
    )
