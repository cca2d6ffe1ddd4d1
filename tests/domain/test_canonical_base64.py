"""One spelling per value: base64 in anything signed or trusted is canonical (RFC 4648 §3.5).

A decoder ignores the spare low bits of the last character, so one key, hash or signature
has up to 16 spellings. Every reader of signed data goes through ``canonical_b64decode``;
these properties pin what it accepts.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.canonical import canonical_b64decode
from domain.errors import CanonicalizationError
from domain.statements import KeyPredicate, StatementError, validate_part
from ledger.signing.keys import PublicKey, SigningKey

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def spellings(data: bytes) -> list[str]:
    """Every string a lenient decoder reads as ``data`` by setting spare bits."""
    text = base64.b64encode(data).decode()
    pads = len(text) - len(text.rstrip("="))
    if pads == 0:
        return [text]
    last = len(text) - pads - 1
    spare = (1 << (2 * pads)) - 1  # 1 pad: 2 spare bits, 2 pads: 4
    base = ALPHABET.index(text[last]) & ~spare
    return [text[:last] + ALPHABET[base | bits] + text[last + 1 :] for bits in range(spare + 1)]


@given(st.binary(max_size=80))
def test_the_canonical_spelling_round_trips_and_no_other_is_accepted(data: bytes) -> None:
    canonical = base64.b64encode(data).decode()
    assert canonical_b64decode(canonical) == data
    for text in spellings(data):
        assert base64.b64decode(text) == data  # what a lenient decoder would accept
        if text != canonical:
            with pytest.raises(CanonicalizationError, match="not canonical"):
                canonical_b64decode(text)


@given(st.text(max_size=12))
def test_anything_else_is_refused_with_a_clear_error(text: str) -> None:
    try:
        data = canonical_b64decode(text)
    except CanonicalizationError as exc:
        assert "base64" in exc.message
    else:
        assert base64.b64encode(data).decode() == text


@pytest.mark.parametrize("value", [None, 5, b"AAAA", ["AAAA"]])
def test_only_strings_are_base64(value: object) -> None:
    with pytest.raises(CanonicalizationError, match="must be a base64 string"):
        canonical_b64decode(value)


@given(st.integers(min_value=1, max_value=3))
def test_a_public_key_and_a_key_statement_have_one_spelling(bits: int) -> None:
    key = SigningKey.generate().public
    assert PublicKey.from_b64(key.b64) == key
    other = next(s for s in spellings(key.raw) if s != key.b64 and ALPHABET.index(s[-2]) & bits)
    with pytest.raises(ValueError, match="not canonical"):
        PublicKey.from_b64(other)
    statement = {
        "issuedAt": "2026-12-01T00:00:00Z",
        "action": "revoke",
        "keyId": key.key_id,
        "publicKey": key.b64,
    }
    validate_part(KeyPredicate, statement)
    with pytest.raises(StatementError, match="not canonical"):
        validate_part(KeyPredicate, statement | {"publicKey": other})


def _reference_decode(text: str) -> bytes | None:
    """What canonical_b64decode accepted before it called binascii directly (the base64
    module's validate=True, then the round trip); None where that refused."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return None
    return raw if base64.b64encode(raw).decode("ascii") == text else None


@given(st.text(alphabet=ALPHABET + "=!- \n\u00e9", max_size=14))
def test_the_direct_decoder_accepts_exactly_what_the_reference_accepts(text: str) -> None:
    expected = _reference_decode(text)
    try:
        got: bytes | None = canonical_b64decode(text)
    except CanonicalizationError:
        got = None
    assert got == expected
