"""The C-encoder fast paths of ``canonical_json`` write exactly what RFC 8785 writes.

``canonical_json`` sends values without floats or non-ASCII keys through msgspec's sorted-key
encoder (issue 16: the JCS of every envelope and log entry was a third of an ingestion's
parsing), and values with floats through it too, with a stand-in for each float that is then
replaced by ``rfc8785``'s spelling of it. If they ever disagreed with RFC 8785, a digest made
here would not match one made by any other JCS implementation, so: for every value the fast
paths take, the bytes are ``rfc8785``'s.
"""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.canonical import (
    _FLOATS,
    _OTHER,
    _PLAIN,
    _plain,
    _shape,
    canonical_json,
    es6_number,
)
from domain.errors import CanonicalizationError

SAFE = 2**53 - 1
# Every code point but lone surrogates (which have no UTF-8 form: tested apart below).
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
ascii_keys = st.text(st.characters(max_codepoint=127), max_size=8)
scalars = st.none() | st.booleans() | st.integers(-SAFE, SAFE) | text
plain_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(ascii_keys, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=600)
@given(plain_values)
def test_the_fast_path_writes_what_rfc8785_writes(value: Any) -> None:
    assert _plain(value)
    assert canonical_json(value) == rfc8785.dumps(value)


finite = st.floats(allow_nan=False, allow_infinity=False)
# Strings that look like the float path's stand-ins, or hold a NUL, or escapes.
lookalikes = st.sampled_from(["\x000\x00", "\x00", "\\u0000", '"\\u00000\\u0000"', "0", ""])
with_floats = st.recursive(
    scalars | finite | lookalikes,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(ascii_keys, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=1500)
@given(with_floats)
def test_values_with_floats_are_written_as_rfc8785_writes_them(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


def _repr_is_es6(number: float) -> bool:
    return not number.is_integer() and 1e-4 <= abs(number) < 1e16


@given(finite, plain_values)
def test_the_float_path_takes_floats_beside_plain_values(number: float, value: Any) -> None:
    both = {"n": number, "v": value, "l": [number, value]}
    # A float the encoder writes itself needs no stand-in; a NUL beside stand-ins is refused.
    stand_in = _OTHER if "\\x00" in repr(value) else _FLOATS
    expected = _PLAIN if _repr_is_es6(number) else stand_in
    assert _shape(both) == expected
    assert canonical_json(both) == rfc8785.dumps(both)


# Not whole, 1e-4 ≤ |x| < 1e16: the C encoder writes them itself, with no stand-in.
es6_as_repr = st.floats(1e-4, 1e16, exclude_max=True).filter(lambda x: not x.is_integer())


@settings(max_examples=3000)
@given(es6_as_repr, st.booleans(), st.integers(0, 15))
def test_floats_the_encoder_writes_itself_are_written_as_rfc8785_writes_them(
    number: float, negative: bool, scale: int
) -> None:
    """The C encoder's spelling of such a float is ES6's: over the whole range, at each power
    of ten (hypothesis favours small and edge values), signed both ways."""
    for candidate in (number, number * 10.0**-scale, number / 10.0**scale + 1e-4):
        value = -candidate if negative else candidate
        if not _repr_is_es6(value):
            continue
        assert _shape({"n": value}) == _PLAIN
        assert canonical_json({"n": value, "l": [value]}) == rfc8785.dumps(
            {"n": value, "l": [value]}
        )


@pytest.mark.parametrize(
    "number",
    [
        1e-4,
        0.00010000000000000002,
        999999999999999.9,
        9999999999999.998,
        1.1676,
        0.559752,
        123456.789,
    ],
)
def test_edges_of_the_encoders_own_floats(number: float) -> None:
    for value in (number, -number):
        assert canonical_json([value]) == rfc8785.dumps([value])


@pytest.mark.parametrize(
    ("value", "shape"),
    [
        ({"a": [1, "x", None, True]}, _PLAIN),
        ({"a": "\x00"}, _PLAIN),  # a NUL without floats: the plain path has no stand-ins
        ({"a": 1.5}, _PLAIN),  # repr's spelling is ES6's: no stand-in needed
        ({"a": 1.0}, _FLOATS),  # whole: repr writes "1.0", ES6 "1"
        ({"a": 1e16 + 2.0}, _FLOATS),  # repr writes an exponent, ES6 not yet
        ({"a": 1e-5}, _FLOATS),  # both exponents, spelled differently
        ({"a": 1.5, "b": "\x00"}, _PLAIN),  # no stand-in: a NUL is harmless
        ({"a": 1.0, "b": "\x00"}, _OTHER),  # a NUL beside floats could pass for a stand-in
        ({"a\x00": 1.0}, _OTHER),
        ({"a": float("nan")}, _OTHER),
        ({"a": [float("inf")]}, _OTHER),
        ({"é": 1.5}, _OTHER),
        ({1: 1}, _OTHER),
    ],
)
def test_each_value_is_sent_the_way_it_can_be_written(value: Any, shape: int) -> None:
    assert _shape(value) == shape


@given(
    st.dictionaries(st.text(max_size=4), text, min_size=1, max_size=4),
    st.floats(allow_nan=False, allow_infinity=False),
)
def test_what_the_fast_path_does_not_take_still_canonicalises(
    keyed: dict[str, str], number: float
) -> None:
    """Floats and non-ASCII keys go to rfc8785: same bytes, whichever keys came."""
    value: Any = {"keys": keyed, "number": number}
    assert canonical_json(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        {"é": 1},  # non-ASCII key: UTF-16 order is rfc8785's job
        {"a": 1.0},
        [True, 1.0],
        {"n": SAFE + 1},
        {"n": -SAFE - 1},
        ("tuple",),
    ],
)
def test_values_outside_the_fast_path_are_recognised(value: Any) -> None:
    assert not _plain(value)


def test_an_int_subclass_is_not_taken_as_an_int() -> None:
    class Level(int):
        def __repr__(self) -> str:
            return "level"

    assert not _plain({"a": Level(3)})
    assert not _plain([True, Level(3)])


@pytest.mark.parametrize("value", ["\ud800", {"k": ["x\udfff"]}, {"\ud800": 1}])
def test_a_lone_surrogate_is_refused_with_a_clear_error(value: Any) -> None:
    with pytest.raises(CanonicalizationError, match=r"lone surrogate|non-UTF-8"):
        canonical_json(value)


@pytest.mark.parametrize("value", [{"n": SAFE + 1}, [-SAFE - 2]])
def test_unsafe_integers_are_still_refused(value: Any) -> None:
    with pytest.raises(CanonicalizationError, match="carry it as a string"):
        canonical_json(value)


@settings(max_examples=3000)
@given(
    st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(1e-5, 1e17)
    | st.floats(-1e17, -1e-5)
    | st.sampled_from([1e-4, 1e16, 9999999999999998.0, 1e16 - 2, 0.0001, 0.00011, 100.0, -0.0])
)
def test_es6_number_writes_what_rfc8785_writes(number: float) -> None:
    assert es6_number(number) == rfc8785.dumps(number)
