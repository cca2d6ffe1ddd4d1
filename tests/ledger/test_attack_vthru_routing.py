"""Attack review of h/vthru: the verifying process routes an event line by a partial read
(``route_line``) and a worker reads it whole (``read_line``); a join's manifests travel from
the workers as JSON bytes. These properties hold the two reads, and the bytes, to the values
the one-process path reads: where the partial read accepts a line, either the whole read
refuses it (the worker reports it, as this process would) or both name the same type, topic
and key id; and manifests read back from their bytes to the same values, type for type."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.documents import parse_json
from ledger.signing.dsse import named_keyid
from ledger.verify.events import is_key_event, worker_event
from ledger.verify.format import UnreadableLineError, read_line, route_line
from ledger.verify.heads_map import _json, _manifests


def same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON type throughout (so -0.0 is not 0.0, nor 1.0 the int 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)  # exact, and -0.0 is not 0.0
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


# Raw JSON tokens, some that a skipping reader may take and a whole reader refuses.
RAW = st.sampled_from(
    [
        "1e999",
        "-1e400",
        "1e-999",
        "-0",
        "-0.0",
        "123456789012345678901234567890",
        "18446744073709551616",
        "-9223372036854775809",
        '"\\ud800"',
        '"\\udc00\\ud800"',
        '"\\u0000"',
        '"a\\/b"',
        '"\\q"',
        "NaN",
        "Infinity",
        "[1,]",
        "{}",
        "[]",
        "null",
        "true",
        "01",
        "1.",
        '"\x00"',
        '"\\u0074ype"',
        '{"a":1,"a":2}',
        '{"signatures":[{"keyid":"k1"}]}',
        '{"signatures":[{"keyid":"k2","keyid":"k3"}]}',
        '{"signatures":[{"keyid":"k4"}],"signatures":[{"keyid":"k5"}]}',
        '"event"',
        '"footer"',
        '"ledger.aggregates:Run.Attested"',
        '"ledger.aggregates:Principal.Registered"',
        '"ledger.aggregates:Principal.Revoked"',
    ]
)
KEYS = st.sampled_from(
    [
        '"type"',
        '"topic"',
        '"envelope"',
        '"\\u0074ype"',
        '"t\\u006fpic"',
        '"envelop\\u0065"',
        '"type "',
        '"Type"',
        '"x"',
        '"type\\u0000"',
        '"\\ud800"',
    ]
)
VALUES = st.one_of(
    RAW,
    st.builds(
        json.dumps,
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
            max_leaves=6,
        ),
    ),
)
SPACE = st.sampled_from(["", " ", "\t", "\n", "\r", "\u00a0", "\x0b"])


@st.composite
def lines(draw: st.DrawFn) -> str:
    pairs = draw(st.lists(st.tuples(KEYS, VALUES), max_size=6))
    pairs = [('"type"', '"event"')] * draw(st.booleans()) + pairs
    ws = draw(SPACE)
    body = ",".join(f"{ws}{k}{draw(SPACE)}:{ws}{v}{ws}" for k, v in pairs)
    return f"{draw(SPACE)}{{{body}}}{draw(SPACE)}\n"


@settings(max_examples=3000, deadline=None)
@given(lines())
def test_the_partial_read_never_routes_a_line_the_whole_read_reads_otherwise(line: str) -> None:
    route = route_line(line)
    try:
        whole = read_line(line)
    except UnreadableLineError:
        return  # refused whole: by the worker if routed, here if not; the same finding
    if route is None:
        return  # read whole here, as in one process
    assert isinstance(whole, dict)
    assert same(route.type, whole.get("type"))
    assert same(route.topic, whole.get("topic"))
    assert same(route.envelope, whole.get("envelope"))
    routed = worker_event(line)
    one_process = whole.get("type") == "event" and not is_key_event(whole)
    assert (routed is not None) == one_process
    if routed is not None:
        assert named_keyid(routed.envelope) == named_keyid(whole.get("envelope"))


# JSON values as the strict reader gives them: integers within ±(2^53-1), finite doubles,
# strings of Unicode scalars (no lone surrogates).
DOCUMENT_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=["Cs"]), max_size=4), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@settings(max_examples=2000, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=8).filter(lambda s: s.isprintable()), DOCUMENT_VALUES, max_size=4
    )
)
def test_manifests_read_back_from_their_bytes_as_they_were(manifests: dict[str, Any]) -> None:
    assert same(_manifests(_json(manifests)), manifests)


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(
        [
            b'{"a":1e20}',
            b'{"a":100000000000000000000}',
            b'{"a":9007199254740992}',
            b'{"a":-0.0}',
            b'{"a":-0}',
            b'{"a":5e-324}',
            b'{"a":1.7976931348623157e308}',
            b'{"a":"\\u2028\\ud83d\\ude00"}',
            b'{"a":0.1,"b":[1.0,1,1E2]}',
            b'{"a":12345678901234567890e-3}',
        ]
    )
)
def test_manifests_the_strict_reader_gives_read_back_alike(text: bytes) -> None:
    value = parse_json(text)
    assert same(_manifests(_json(value)), value)
    assert msgspec.json.encode(_manifests(_json(value))) == msgspec.json.encode(value)
