"""A fold row's predicate with its shared manifest documents cut out
(``ledger.store.fold_manifests``) splices back to the signer's text, byte for byte, whatever
the text: the fold parses what it joins, so any other text could fold otherwise."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.store.fold_fields import FoldFields, decode_fields, row_of, whole
from ledger.store.fold_manifests import _find, join, split

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)
BIG_DOCUMENT = st.fixed_dictionaries(
    {"apiVersion": st.just("kernelindex.dev/v1"), "kind": st.text(max_size=20), "spec": JSON},
    optional={"metadata": st.dictionaries(st.text(max_size=8), st.text(max_size=200))},
).map(lambda d: {**d, "padding": "x" * 130})  # past the size shared documents start at
ROLES = st.sampled_from(["run", "protocol", "environment", "implementation", "workload", "é"])
MANIFESTS = st.dictionaries(ROLES, BIG_DOCUMENT | JSON, max_size=5)


def _texts(value: Any) -> list[bytes]:
    """``value`` as signers may write it: compact, spaced, indented, ASCII-escaped."""
    return [
        json.dumps(value, separators=(",", ":")).encode(),
        json.dumps(value).encode(),
        json.dumps(value, indent=2, ensure_ascii=False).encode(),
        msgspec.json.encode(value),
    ]


@settings(max_examples=300, deadline=None)
@given(MANIFESTS, JSON, st.booleans())
def test_split_then_join_is_the_text_itself(manifests: Any, other: Any, twice: bool) -> None:
    predicate = {"source": other, "manifests": manifests}
    if twice and manifests:  # the same document under two roles, and elsewhere in the text
        first = next(iter(manifests.values()))
        predicate["manifests"] = {**manifests, "copy": first}
        predicate["sourceNative"] = first
    for text in _texts(predicate):
        cut, shared, bodies = split(text)
        assert join(cut, shared, bodies) == text
        assert all(hashlib.sha256(b).digest() == k for k, b in bodies.items())
        assert {k for _, k in shared} == set(bodies)
        assert len(cut) + sum(len(bodies[k]) for _, k in shared) == len(text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | JSON.map(lambda v: json.dumps(v).encode()))
def test_any_text_not_a_predicate_with_manifests_is_kept_whole(text: bytes) -> None:
    cut, shared, bodies = split(text)
    assert join(cut, shared, bodies) == text


def test_the_run_and_short_documents_stay_inline_and_the_rest_are_shared() -> None:
    protocol = {"kind": "BenchmarkProtocol", "spec": {"notes": "p" * 200}}
    run = {"kind": "BenchmarkRun", "spec": {"notes": "r" * 200}}
    predicate = {"manifests": {"run": run, "protocol": protocol, "tiny": {"a": 1}}}
    text = json.dumps(predicate).encode()
    cut, shared, bodies = split(text)
    assert list(bodies.values()) == [json.dumps(protocol).encode()]
    assert json.dumps(run).encode() in cut and b'{"a": 1}' in cut
    assert join(cut, shared, {}) is None  # a document missing: no text at all, never a wrong one


def test_a_row_names_its_documents_and_reads_back_whole_with_them() -> None:
    predicate = json.dumps({"manifests": {"protocol": {"notes": "p" * 200}}}).encode()
    fields = FoldFields("Run.Ingested", "sha256:00", "at", "key", None, predicate)
    row, bodies = row_of(fields)
    stored = decode_fields(row)
    assert stored.shared and len(row) < len(predicate)
    assert whole(stored, bodies) == fields
    assert whole(stored, {}) is None
    # A row of schema 5 (six fields, the predicate whole) reads as itself.
    old = msgspec.msgpack.encode(list(msgspec.structs.astuple(fields))[:6])
    assert whole(decode_fields(old), {}) == fields


def test_a_shared_documents_key_is_its_hash_every_time_it_is_cut() -> None:
    """The keys of documents cut again (remembered, ``_key_of``), and after more distinct
    documents than are remembered, are still the sha256 of each one's bytes."""

    def predicate(n: int) -> bytes:
        document = {"apiVersion": "kernelindex.dev/v1", "kind": "K", "spec": {"n": n}}
        return msgspec.json.encode({"manifests": {"protocol": {**document, "pad": "x" * 130}}})

    for n in [1, 1, *range(2, 1500), 1]:
        _, shared, bodies = split(predicate(n))
        [(_, key)] = shared
        assert bodies == {key: bodies[key]} and hashlib.sha256(bodies[key]).digest() == key
        assert b'"n":%d}' % n in bodies[key]


# Texts over a few bytes repeat a document's first bytes often: past ``_CANDIDATES`` places
# that start alike, and documents shorter than the probe, both roads of ``_find`` run.
_FEW = st.binary(max_size=0) | st.lists(st.sampled_from([b"{", b'"a', b"}", b"x"])).map(b"".join)


@settings(max_examples=500, deadline=None)
@given(_FEW, _FEW, st.integers(min_value=0, max_value=4), st.integers(min_value=-3, max_value=80))
def test_find_answers_as_bytes_find(body: bytes, filler: bytes, copies: int, start: int) -> None:
    """``split``'s search for a document is ``bytes.find``: the first place from ``start``."""
    text = (filler + body) * copies + filler
    assert _find(text, body, start) == text.find(body, start)
    long_body = b'{"apiVersion":"x"' + body
    assert _find(text + long_body, long_body, start) == (text + long_body).find(long_body, start)


def test_find_past_many_places_that_start_alike() -> None:
    body = b'{"apiVersion":"kernelindex.dev/v1alpha1","kind":"Protocol"}'
    decoys = b",".join(body[:-3] + bytes([n]) + b'"}' for n in range(65, 105))
    text = decoys + b"," + body + b"," + body
    assert text.count(body[:16]) > 40
    assert _find(text, body, 0) == text.find(body) == len(decoys) + 1
    assert _find(text, body, len(decoys) + 2) == text.find(body, len(decoys) + 2)
