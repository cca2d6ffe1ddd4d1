"""RFC 8785 (JCS) conformance of domain.canonical: the cyberphone vectors in
conformance/vectors/jcs, plus properties of canonical_json and digest_of."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.canonical import canonical_json, digest_hex, digest_of, is_digest
from domain.documents import parse_json
from domain.errors import CanonicalizationError
from tests.paths import CONFORMANCE

SHARED = CONFORMANCE
JCS = SHARED / "vectors" / "jcs"
VECTOR_NAMES = sorted(p.stem for p in (JCS / "input").glob("*.json")) if JCS.is_dir() else []
VECTORS = VECTOR_NAMES or [
    pytest.param("missing", marks=pytest.mark.skip(reason=f"JCS vectors not found at {JCS}"))
]

MAX_SAFE = 2**53 - 1


def _expected(name: str) -> bytes:
    return (JCS / "output" / f"{name}.json").read_bytes()


def _outhex(name: str) -> bytes:
    return bytes.fromhex((JCS / "outhex" / f"{name}.txt").read_text())


def test_the_vector_set_is_complete() -> None:
    assert len(VECTOR_NAMES) >= 4
    for name in VECTOR_NAMES:
        assert (JCS / "output" / f"{name}.json").is_file(), name
        assert (JCS / "outhex" / f"{name}.txt").is_file(), name


@pytest.mark.parametrize("name", VECTORS)
def test_vector_canonicalises_to_expected_bytes(name: str) -> None:
    value = json.loads((JCS / "input" / f"{name}.json").read_bytes())
    assert canonical_json(value) == _expected(name)


@pytest.mark.parametrize("name", VECTORS)
def test_vector_through_our_strict_json_parser(name: str) -> None:
    value = parse_json((JCS / "input" / f"{name}.json").read_bytes())
    assert canonical_json(value) == _expected(name)


@pytest.mark.parametrize("name", VECTORS)
def test_outhex_agrees_with_output(name: str) -> None:
    assert _outhex(name) == _expected(name)
    value = json.loads((JCS / "input" / f"{name}.json").read_bytes())
    assert canonical_json(value) == _outhex(name)


@pytest.mark.parametrize("name", VECTORS)
def test_vector_digest_is_sha256_of_expected_bytes(name: str) -> None:
    value = json.loads((JCS / "input" / f"{name}.json").read_bytes())
    assert digest_of(value) == "sha256:" + hashlib.sha256(_expected(name)).hexdigest()


@pytest.mark.parametrize("name", VECTORS)
def test_expected_output_is_a_fixed_point(name: str) -> None:
    assert canonical_json(json.loads(_expected(name))) == _expected(name)


# --- fixed examples beyond the vectors ----------------------------------------------------------


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16, which sorts before U+FFFF; in code
    # point order it would come after.
    value = {"\uffff": 1, "\U0001f600": 2, "a": 3}
    assert canonical_json(value) == '{"a":3,"\U0001f600":2,"\uffff":1}'.encode()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, b"1"),
        (-0.0, b"0"),
        (1e21, b"1e+21"),
        (1e-7, b"1e-7"),
        (0.1, b"0.1"),
        (MAX_SAFE, b"9007199254740991"),
        (-MAX_SAFE, b"-9007199254740991"),
        ("\u2028\u007f", '"\u2028\u007f"'.encode()),
        ("\x1f", b'"\\u001f"'),
        ([], b"[]"),
        ({}, b"{}"),
    ],
)
def test_known_serialisations(value: Any, expected: bytes) -> None:
    assert canonical_json(value) == expected


@pytest.mark.parametrize("value", [MAX_SAFE + 1, -(MAX_SAFE + 1), 2**64, {"a": [2**60]}])
def test_unsafe_integers_are_refused(value: Any) -> None:
    with pytest.raises(CanonicalizationError, match="string"):
        canonical_json(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [float("-inf")]])
def test_nan_and_infinity_are_refused(value: Any) -> None:
    with pytest.raises(CanonicalizationError, match="NaN and Infinity"):
        canonical_json(value)


def test_is_digest_and_digest_hex() -> None:
    good = "sha256:" + "0123456789abcdef" * 4
    assert is_digest(good)
    assert digest_hex(good) == "0123456789abcdef" * 4
    for bad in [
        "sha256:" + "0123456789ABCDEF" * 4,
        "sha256:" + "0" * 63,
        "sha256:" + "0" * 65,
        "sha512:" + "0" * 64,
        "0" * 64,
        "sha256:" + "g" * 64,
        None,
        42,
    ]:
        assert not is_digest(bad)
        with pytest.raises(CanonicalizationError, match="digest"):
            digest_hex(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [2.0**53, 1e16, -1.5e20])
def test_large_integral_float_round_trip(value: float) -> None:
    once = canonical_json({"x": value})
    assert canonical_json(parse_json(once)) == once


# --- properties ---------------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE, max_value=MAX_SAFE)
    # Integral floats in [2**53, 1e21) serialise as integer digits that canonical_json then
    # refuses on re-reading (see test_large_integral_float_round_trip below).
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not 2**53 <= abs(f) < 1e21)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)


def _shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in another insertion order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(json_values)
def test_canonical_json_is_idempotent(value: Any) -> None:
    once = canonical_json(value)
    reparsed = json.loads(once)
    assert canonical_json(reparsed) == once
    assert reparsed == value  # canonicalisation never changes the value
    once.decode("utf-8")  # always UTF-8


@PROPERTY_SETTINGS
@given(
    json_values,
    st.randoms(use_true_random=False),
    st.sampled_from([None, 0, 1, 2, "\t"]),
    st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :  ")]),
    st.booleans(),
)
def test_key_order_and_whitespace_never_change_the_bytes(
    value: Any,
    rng: random.Random,
    indent: int | str | None,
    separators: tuple[str, str],
    ensure_ascii: bool,
) -> None:
    text = json.dumps(
        _shuffled(value, rng), indent=indent, separators=separators, ensure_ascii=ensure_ascii
    )
    assert canonical_json(json.loads(text)) == canonical_json(value)
    assert digest_of(json.loads(text)) == digest_of(value)


@PROPERTY_SETTINGS
@given(json_values, json_values, st.booleans(), st.randoms(use_true_random=False))
def test_digest_equal_iff_canonical_bytes_equal(
    a: Any, other: Any, same: bool, rng: random.Random
) -> None:
    b = _shuffled(a, rng) if same else other
    assert (digest_of(a) == digest_of(b)) == (canonical_json(a) == canonical_json(b))
    for v in (a, b):
        d = digest_of(v)
        assert is_digest(d)
        assert digest_hex(d) == hashlib.sha256(canonical_json(v)).hexdigest()
