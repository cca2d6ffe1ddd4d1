"""The envelope reader's fast paths decide exactly as the reference rules they stand in for:
whatever a fast path accepts, the reference accepts with the same value, and everything else
goes to the reference (which then refuses it in its own words)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

import msgspec
import pytest
import rfc8785
from hypothesis import example, given
from hypothesis import strategies as st

import ledger.signing.dsse as dsse
from domain.canonical import canonical_b64decode, canonical_json, plain_json
from domain.errors import CanonicalizationError
from domain.statements import PAYLOAD_TYPE
from ledger.signing.dsse import (
    Envelope,
    EnvelopeError,
    _b64_fast,
    _b64decode_strict,
    _still_plain,
    pae,
    parse_envelope,
    signed_digest,
    stored_payload,
)

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# The alphabet, padding, and what a lenient decoder might let through.
_NEAR_BASE64 = st.text(alphabet=_ALPHABET + "=-_ \n\r\t.é\x00\ud800Ａ", max_size=24)


def _reference(text: str) -> bytes | None:
    try:
        return canonical_b64decode(text)
    except CanonicalizationError:
        return None


@given(st.one_of(_NEAR_BASE64, st.text(alphabet=_ALPHABET + "=", max_size=24)))
@example("QUJ=")  # stray bits in the last group
@example("QR==")
@example("QUJD====")  # padding a decoder may skip
@example("")
@example("=")
@example("QUJ\ud800")  # a lone surrogate: no UTF-8, so no base64
def test_fast_base64_accepts_only_what_the_reference_accepts(text: str) -> None:
    fast = _b64_fast(text)
    if fast is not None:
        assert _reference(text) == fast


@given(st.binary(max_size=64))
def test_fast_base64_reads_every_canonical_spelling(raw: bytes) -> None:
    text = base64.b64encode(raw).decode("ascii")
    assert _b64_fast(text) == raw  # the fast path is taken, not merely correct


@pytest.mark.parametrize("before", ["", "QUJD"])
def test_every_padded_last_group_is_read_as_the_reference_reads_it(before: str) -> None:
    """Exhaustive over the last groups that padding lets spell their bytes otherwise (every
    ``XY==`` and ``XYZ=`` of the alphabet and ``=``): the fast road gives the reference's
    bytes where that accepts, None where it refuses, and is taken for every canonical one."""
    symbols = _ALPHABET + "="
    groups = {x + y + z + "=" for x in symbols for y in symbols for z in symbols}  # and XY==
    taken = 0
    for group in groups:
        text = before + group
        reference = _reference(text)
        fast = _b64_fast(text)
        assert fast == reference or (fast is None and reference is not None), text
        taken += fast is not None
        if reference is not None:
            assert fast == reference, text  # a canonical spelling always takes the fast road
    # 64 x 4 canonical "XY==" groups (Y of the 4 with 4 clear bits), 64 x 64 x 16 "XYZ=".
    assert taken == 64 * 4 + 64 * 64 * 16


@given(st.binary(min_size=1, max_size=64), st.integers(0, 63))
def test_a_changed_last_character_is_read_as_the_reference_reads_it(raw: bytes, spare: int) -> None:
    text = base64.b64encode(raw).decode("ascii")
    body = text.rstrip("=")
    changed = body[:-1] + _ALPHABET[spare] + text[len(body) :]
    assert _b64_fast(changed) in (None, _reference(changed))
    try:
        decoded: bytes | None = _b64decode_strict(changed, "payload")
    except EnvelopeError:
        decoded = None
    assert decoded == _reference(changed)


def _lenient(text: str) -> bytes | str:
    try:
        return binascii.a2b_base64(text)
    except (binascii.Error, ValueError) as exc:
        return type(exc).__name__


@given(st.one_of(_NEAR_BASE64, st.text(alphabet=_ALPHABET + "=", max_size=24)))
@example("QUJ=")
@example("QR==")
@example("QUJD====")
@example("QU JD")
@example("QUJ\ud800")
def test_a_stored_payload_is_read_as_binascii_reads_it(text: str) -> None:
    """``stored_payload`` stands in for ``binascii.a2b_base64`` (the rebuild's and the
    commit's fold fields): the same bytes, or the same failure, for any text."""
    try:
        fast: bytes | str = stored_payload(text)
    except (binascii.Error, ValueError) as exc:
        fast = type(exc).__name__
    assert fast == _lenient(text)


@given(st.binary(max_size=64))
def test_a_stored_payload_takes_the_fast_path_on_standard_base64(raw: bytes) -> None:
    text = base64.b64encode(raw).decode("ascii")
    assert stored_payload(text) == raw == msgspec.convert(text, bytes)


def test_a_refused_spelling_keeps_the_reference_message() -> None:
    with pytest.raises(EnvelopeError, match="payload is not valid standard base64"):
        _b64decode_strict("QUJ\ud800", "payload")
    with pytest.raises(EnvelopeError, match="payload is not canonical base64"):
        _b64decode_strict("QUJ=", "payload")
    with pytest.raises(EnvelopeError, match="payload is not valid standard base64"):
        _b64decode_strict("QU JD", "payload")


def _envelope(keyid: str, payload: bytes, sig: bytes) -> dict[str, object]:
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": keyid, "sig": base64.b64encode(sig).decode("ascii")}],
    }


@given(st.text(max_size=12), st.binary(max_size=40), st.binary(max_size=8))
@example("\ud800", b"{}", b"s")  # a lone surrogate: no UTF-8, so no JCS
@example("k\x00é", b"{}", b"s")
def test_an_envelope_parses_exactly_when_it_has_jcs_bytes_and_they_are_its_own(
    keyid: str, payload: bytes, sig: bytes
) -> None:
    raw = _envelope(keyid, payload, sig)
    try:
        expected: bytes | None = canonical_json(dict(raw))
    except CanonicalizationError:
        expected = None
    try:
        envelope = parse_envelope(raw)
    except EnvelopeError as exc:
        assert expected is None
        assert "not canonicalisable" in exc.message
        return
    assert expected is not None
    assert envelope.canonical == expected
    assert envelope.digest == "sha256:" + hashlib.sha256(expected).hexdigest()


@given(st.text(max_size=12), st.binary(max_size=300), st.text(max_size=80))
@example(PAYLOAD_TYPE, b"{}", "sha256:" + "ab" * 32)
def test_the_signed_digest_hashes_the_key_id_and_the_pae_bytes(
    payload_type: str, payload: bytes, keyid: str
) -> None:
    """``signed_digest`` hashes its prefix and then the payload without joining them: the
    same digest as over the one message it is defined by."""
    try:
        named, t = keyid.encode("utf-8"), payload_type.encode("utf-8")
    except UnicodeEncodeError:
        return  # a lone surrogate: no UTF-8, no envelope
    message = b"%d %s " % (len(named), named) + pae(payload_type, payload)
    assert signed_digest(payload_type, payload, keyid) == (
        "sha256:" + hashlib.sha256(message).hexdigest()
    )
    assert t in message


# Payloads, key ids and signature texts few enough that envelopes share them often.
_ALIKE = st.tuples(
    st.sampled_from(["QUJD", "QUJE", "e30=", ""]),
    st.sampled_from(["k", "j"]),
    st.sampled_from(["c2ln", "c2lo"]),
)


@given(st.lists(_ALIKE, max_size=12))
def test_the_signed_digest_memo_answers_only_for_the_payload_it_digested(
    envelopes: list[tuple[str, str, str]],
) -> None:
    """Envelopes that share a key id and signature text but not a payload (a stored copy
    changed behind the ledger's back) each get their own signed digest, in any order, parsed
    or read from the store, and a copy of the same object text hits the memo."""
    from ledger.signing import dsse

    dsse._SIGNED_DIGESTS.clear()
    for payload, keyid, sig in envelopes:
        raw = {"payloadType": PAYLOAD_TYPE, "payload": payload,
               "signatures": [{"keyid": keyid, "sig": sig}]}  # fmt: skip
        expected = signed_digest(PAYLOAD_TYPE, base64.b64decode(payload), keyid)
        assert dsse.stored_signed_digest(raw) == expected
        assert dsse.stored_signed_digest(dict(raw, payload="".join(payload))) == expected
        assert parse_envelope(raw).signed_digest == expected


# Strings with what JCS escapes (controls, quote, backslash), non-ASCII, astral characters
# and lone surrogates (which have no JCS: both roads must refuse them alike).
_ANY_TEXT = st.text(alphabet=st.characters(codec=None), max_size=12) | st.sampled_from(
    ["", '\x00\x1f\x7f"\\/', "é€😀", "\ud800", "\u2028\u2029", "\U0010ffff"]
)
# What else a caller's dict may hold where a string was: big integers, floats, other shapes.
_NOT_TEXT = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)


def _jcs_or_refusal(make: Any) -> bytes | str:
    try:
        return bytes(make())
    except CanonicalizationError:
        return "refused"


@given(
    st.fixed_dictionaries(
        {"payloadType": _ANY_TEXT | _NOT_TEXT, "payload": _ANY_TEXT | _NOT_TEXT},
        optional={"extra": _ANY_TEXT, "é": _ANY_TEXT},
    ),
    st.fixed_dictionaries(
        {"keyid": _ANY_TEXT | _NOT_TEXT},
        optional={"sig": _ANY_TEXT | _NOT_TEXT, "other": _NOT_TEXT},
    ),
    st.integers(0, 2),
)
@example({"payloadType": PAYLOAD_TYPE, "payload": "eyJ9"}, {"keyid": "k\ud800", "sig": ""}, 1)
@example({"payloadType": PAYLOAD_TYPE, "payload": "eyJ9"}, {"keyid": 2**60, "sig": ""}, 1)
def test_a_plain_envelopes_jcs_is_the_reference_canonical_form(
    top: dict[str, Any], item: dict[str, Any], copies: int
) -> None:
    """``Envelope.canonical`` of a dict the envelope's shape (``_still_plain``) is the C
    encoder's bytes without ``canonical_json``'s walk: the same bytes as ``canonical_json``
    (and rfc8785's), or the same refusal, whatever the dict holds: non-ASCII and escaped
    text, lone surrogates, big integers, floats, other keys and other shapes."""
    raw = {**top, "signatures": [dict(item) for _ in range(copies)]}
    envelope = Envelope(PAYLOAD_TYPE, b"", (("k", b""),), raw, None)
    fast = _jcs_or_refusal(lambda: envelope.canonical)
    assert fast == _jcs_or_refusal(lambda: canonical_json(dict(raw)))
    if fast != "refused":
        assert fast == rfc8785.dumps(raw)
    if _still_plain(raw):
        assert fast == _jcs_or_refusal(lambda: plain_json(raw))


def test_a_parsed_envelope_takes_the_plain_road_and_a_changed_one_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(b'{"a": 1}').decode(),
        "signatures": [{"keyid": 'clé \x01"\\ 😀', "sig": base64.b64encode(b"s").decode()}],
    }
    envelope = parse_envelope(raw)
    assert envelope.made is None and _still_plain(raw)
    expected = canonical_json(dict(raw))
    monkeypatch.setattr(dsse, "canonical_json", _not_called)
    assert envelope.canonical == expected  # the plain road, no walk
    # The caller's dict changed after the parse (a float JCS spells otherwise than msgspec):
    # the JCS is the reference's.
    changed = parse_envelope(dict(raw, signatures=[dict(raw["signatures"][0])]))
    changed.raw["signatures"][0]["sig"] = 1e21  # type: ignore[index]
    monkeypatch.undo()
    assert changed.canonical == canonical_json(dict(changed.raw)) == rfc8785.dumps(changed.raw)
    assert b"1e+21" in changed.canonical


def _not_called(*_: object, **__: object) -> bytes:
    raise AssertionError("the reference road was taken")
