"""``parse_json``'s msgspec path decides exactly as the strict reader does.

``parse_json`` reads every signed statement (admission, history, audit, offline verify), so
its answer is part of what the ledger accepts. The fast path (issue 16) may only ever say
"this document is acceptable and its value is V" where the strict reader
(``_parse_json_strictly``: ``json.loads`` with hooks for duplicate keys, constants, numbers)
would say the same; everything else it hands to the strict reader. These properties compare
the two on generated documents, spelled many ways, with duplicate keys, escapes, long
integers and deep nesting mixed in, and on random mutations of them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.documents import MAX_DEPTH, _parse_json_strictly, _strict_fast, parse_json
from domain.errors import DomainError

SAFE = 2**53 - 1

keys = st.text(st.sampled_from(list('ab:\\"é\u2028\x01 u0')), max_size=4) | st.text(max_size=6)
strings = st.text(max_size=10) | st.text(st.sampled_from(list(':"\\/u0a\x00\x1f')), max_size=8)
numbers = (
    st.integers(-SAFE, SAFE)
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([SAFE, SAFE + 1, SAFE + 2, -SAFE - 1, 2**53, 2**64, 10**16, -(10**17)])
    | st.floats(allow_nan=False, allow_infinity=False)
)
scalars = st.none() | st.booleans() | numbers | strings
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=25,
)


def typed(value: Any) -> Any:
    """The value with every scalar's type spelled out (``1`` and ``1.0`` differ; -0.0 too)."""
    if isinstance(value, dict):
        return ("dict", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, value)


def outcome(parse: Any, data: bytes) -> Any:
    try:
        return ("ok", typed(parse(data)))
    except DomainError as exc:
        return ("refused", type(exc).__name__, exc.message)


def assert_same(data: bytes) -> None:
    strict = outcome(_parse_json_strictly, data)
    assert outcome(parse_json, data) == strict
    fast = _strict_fast(data)
    if fast is not _strict_fast.__globals__["_NOT_DECIDED"]:
        # Whatever the fast path decides on its own, the strict reader accepts, identically.
        assert strict == ("ok", typed(fast))


def spell(value: Any, style: int) -> bytes:
    """One of several legal spellings of a value (compact, spaced, ASCII-escaped)."""
    if style == 0:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    if style == 1:
        return json.dumps(value, indent=1, ensure_ascii=False).encode()
    return json.dumps(value, separators=(" , ", " : "), ensure_ascii=True).encode()


@settings(max_examples=1500)
@given(values, st.integers(0, 2))
def test_every_spelling_of_a_value_reads_the_same_both_ways(value: Any, style: int) -> None:
    assert_same(spell(value, style))


@settings(max_examples=1000)
@given(values, st.integers(0, 2), st.data())
def test_duplicate_keys_anywhere_are_refused_both_ways(value: Any, style: int, data: Any) -> None:
    """A key repeated inside some object (the text spells the object by hand)."""
    text = spell(value, style).decode()
    key = data.draw(keys)
    repeated = json.dumps(key, ensure_ascii=style == 2)
    doc = data.draw(st.sampled_from([0, 1]))
    item = data.draw(st.sampled_from(['"x:y"', "1", "[]", '{"a":1}', "null"]))
    body = f"{repeated}:{item},{repeated}:{item}"
    spelled = f"{{{body}}}" if doc == 0 else f'{{"outer":[{text},{{{body}}}]}}'
    assert_same(spelled.encode())
    assert outcome(parse_json, spelled.encode())[0] == "refused"


@settings(max_examples=1500)
@given(values, st.integers(0, 2), st.data())
def test_mutated_documents_are_judged_the_same_both_ways(value: Any, style: int, data: Any) -> None:
    spelled = bytearray(spell(value, style))
    for _ in range(data.draw(st.integers(1, 3))):
        if not spelled:
            break
        at = data.draw(st.integers(0, len(spelled) - 1))
        op = data.draw(st.sampled_from(["set", "insert", "delete"]))
        byte = data.draw(st.sampled_from(list(b':,"\\{}[]u0123456789eE.-+ \x00\xff')))
        if op == "set":
            spelled[at] = byte
        elif op == "insert":
            spelled.insert(at, byte)
        else:
            del spelled[at]
    assert_same(bytes(spelled))


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":1,"a":1}',
        b'{"a:b":1,"a:b":2}',
        b'{"a":"x:y","a":"z"}',
        b'{"a\\u003a":1,"a:":2}',  # an escaped colon: the strict reader decides
        b'{"a":"x","a":"\\u003a"}',  # colons balance: only the \\u guard catches it
        b'{"\\u0061":1,"a":2}',
        b'[{"k":1},{"k":1,"k":2}]',
        b'{"n":9007199254740991}',
        b'{"n":9007199254740992}',
        b'{"n":9007199254740993}',
        b'{"n":-9007199254740993}',
        b'{"s":"12345678901234567890"}',
        b'{"s":",12345678901234567890,"}',
        b"12345678901234567890",
        b"1e309",
        b"-1e-400",
        b"NaN",
        b'{"a":Infinity}',
        b'"\\ud800"',
        b'"\xff"',
        b"\xef\xbb\xbf{}",
        b'{"a":1,}',
        b"",
        b'"tab\there"',
        b"[" * MAX_DEPTH + b"]" * MAX_DEPTH,
        b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
        b"[" * 5000 + b"]" * 5000,
        b'{"a":' * 200 + b"1" + b"}" * 200,
    ],
)
def test_the_hard_cases_read_the_same_both_ways(data: bytes) -> None:
    assert_same(data)


def test_the_fast_path_takes_a_signed_statement() -> None:
    """The documents the ledger reads most (canonical statements) are decided fast."""
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "run", "digest": {"sha256": "ab" * 32}}],
        "predicate": {"latencyMs": 0.008, "count": 3, "at": "2026-08-16T00:22:00Z"},
    }
    data = json.dumps(statement, separators=(",", ":")).encode()
    assert _strict_fast(data) == statement
