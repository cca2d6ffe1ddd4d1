"""The fold's predicate with each shared document parsed once (``fold_fields.predicate_with``)
is the value the whole road reads (``predicate_of(whole(…))``), value and types alike,
whatever the text: the documents put back where their placeholders are, and every text the
placeholder road cannot read exactly (a long integer, a NUL escape, a document cut out
somewhere other than ``manifests``) read whole."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.store import fold_fields
from ledger.store.fold_fields import (
    FoldFields,
    decode_fields,
    predicate_of,
    predicate_with,
    row_of,
    whole,
)
from tests.ledger.test_fold_manifests import BIG_DOCUMENT, JSON, ROLES, _texts

# Leaves the placeholder road must leave to the whole road: an integer beyond 2^53 (read
# as a float by the strict reader) and a NUL, which a placeholder is spelt with.
ODD = st.sampled_from([2**60, -(2**55), 12345678901234567, "\x00", "\x000", "a\x00b", 1.5])
ODD_DOCUMENT = st.tuples(BIG_DOCUMENT, ODD).map(lambda d: {**d[0], "odd": d[1]})
MANIFESTS = st.dictionaries(ROLES, BIG_DOCUMENT | ODD_DOCUMENT | JSON, max_size=5)


def _outcome(read: Any) -> Any:
    try:
        value = read()
    except Exception as exc:  # a text the strict reader refuses: the same refusal
        return ("refused", type(exc), str(exc))
    # Encoded too: 1 == 1.0 and True == 1 in Python, not in the views' JSON columns.
    return ("read", value, msgspec.json.encode(value))


def _same(fields: FoldFields, bodies: dict[bytes, bytes]) -> None:
    slow_fields = whole(fields, bodies)
    assert slow_fields is not None
    slow = _outcome(lambda: predicate_of(slow_fields))
    assert _outcome(lambda: predicate_with(fields, bodies)) == slow


@settings(max_examples=300, deadline=None)
@given(MANIFESTS, JSON | ODD, st.booleans(), st.booleans())
def test_the_shared_road_reads_the_predicate_the_whole_road_reads(
    manifests: Any, other: Any, twice: bool, nested: bool
) -> None:
    predicate: dict[str, Any] = {"source": other, "manifests": manifests}
    if twice and manifests:  # one document under two roles, and elsewhere in the text
        first = next(iter(manifests.values()))
        predicate["manifests"] = {**manifests, "copy": first}
        predicate["sourceNative"] = first
    if nested and manifests:  # a copy before the manifests: ``split`` may cut it there
        predicate = {"aaa": {"deep": next(iter(manifests.values()))}, **predicate}
    for text in _texts(predicate):
        fields = FoldFields("Run.Ingested", "sha256:00", "at", "key", None, text)
        row, bodies = row_of(fields)
        _same(decode_fields(row), bodies)
        fold_fields._PARSED.clear()  # parsed afresh, and from the cache, alike
        fold_fields._PARSED_TEXT[0] = 0
        _same(decode_fields(row), bodies)


def test_the_documents_are_put_where_they_were_cut_and_shared_between_rows() -> None:
    protocol = {"kind": "Protocol", "spec": {"notes": "p" * 200}}
    environment = {"kind": "Environment", "spec": {"notes": "e" * 200}}
    rows = []
    for n in range(2):
        run = {"kind": "Run", "n": n}
        text = json.dumps(
            {"manifests": {"environment": environment, "protocol": protocol, "run": run}}
        ).encode()
        row, bodies = row_of(FoldFields("Run.Ingested", "sha256:00", "at", "key", None, text))
        rows.append(predicate_with(decode_fields(row), bodies))
    for n, value in enumerate(rows):
        assert value["manifests"] == {
            "environment": environment,
            "protocol": protocol,
            "run": {"kind": "Run", "n": n},
        }
    # Parsed once: the second row holds the first's very documents.
    assert rows[0]["manifests"]["protocol"] is rows[1]["manifests"]["protocol"]


def test_a_document_missing_gives_none_never_a_wrong_value() -> None:
    text = json.dumps({"manifests": {"protocol": {"notes": "p" * 200}}}).encode()
    row, _ = row_of(FoldFields("Run.Ingested", "sha256:00", "at", "key", None, text))
    assert predicate_with(decode_fields(row), {}) is None


def test_a_large_shared_document_is_read_but_not_kept() -> None:
    # A parsed document holds ~9x its text: past 16 KiB it is parsed each time, not kept.
    from ledger.store import fold_fields

    small = b'{"a":1}'
    large = b'{"a":"' + b"x" * (fold_fields._PARSED_LARGEST) + b'"}'
    assert fold_fields._parsed(small) == {"a": 1} and small in fold_fields._PARSED
    assert fold_fields._parsed(large) == {"a": "x" * fold_fields._PARSED_LARGEST}
    assert large not in fold_fields._PARSED


def test_the_kept_documents_stay_within_their_text_budget() -> None:
    from ledger.store import fold_fields

    body = b'{"a":"' + b"y" * 16_000 + b'"}'
    fold_fields._PARSED.clear()
    fold_fields._PARSED_TEXT[0] = 0
    for i in range(1_000):  # ~16 MB of distinct texts, twice the budget
        fold_fields._parsed(body[:-2] + str(i).encode() + b'"}')
        kept = sum(len(text) for text in fold_fields._PARSED)
        assert kept == fold_fields._PARSED_TEXT[0] <= fold_fields._PARSED_TEXT_BUDGET
