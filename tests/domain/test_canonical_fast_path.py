"""The C-encoder fast path of ``canonical_json`` writes exactly what RFC 8785 writes.

``canonical_json`` sends values without floats or non-ASCII keys through ``json.dumps``
(issue 16: the JCS of every envelope and log entry was a third of an ingestion's parsing).
If the two ever disagreed, a digest made here would not match one made by any other JCS
implementation, so: for every value the fast path takes, its bytes are ``rfc8785``'s.
"""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.canonical import _plain, canonical_json
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
        {"a": 1.5},
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
