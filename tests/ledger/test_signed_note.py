"""Tests for ledger.proofs.signed_note: the C2SP signed-note example, tampering, malformed notes,
verifier key strings, sign/open round trips and tlog checkpoints."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.proofs.merkle import EMPTY_ROOT
from ledger.proofs.signed_note import (
    MAX_SIGNATURES,
    Checkpoint,
    InvalidKeyName,
    InvalidSignature,
    MalformedCheckpoint,
    MalformedNote,
    MalformedVerifierKey,
    NoteError,
    TooManySignatures,
    UnverifiedNote,
    Verifier,
    format_checkpoint,
    key_id,
    open_checkpoint,
    open_note,
    parse_checkpoint,
    parse_verifier_key,
    sign_note,
    verifier_key_string,
)
from tests.paths import CONFORMANCE

SHARED = CONFORMANCE
NOTE_VECTORS = SHARED / "vectors" / "signed-note"

EM = "\u2014"
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"


def _example() -> tuple[bytes, Verifier]:
    note = (NOTE_VECTORS / "example.note").read_bytes()
    verifier = parse_verifier_key((NOTE_VECTORS / "example.vkey").read_text().strip())
    return note, verifier


def _key(seed: int) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"key %d" % seed).digest())


# --------------------------------------------------------------------------------------------
# The spec's example


def test_example_note_verifies() -> None:
    note, verifier = _example()
    opened = open_note(note, [verifier])
    assert opened.text == "This is an example message.\n"
    assert [s.name for s in opened.signatures] == ["example.com/foo"]
    assert opened.signatures[0].key_id == bytes.fromhex("530d903a")
    assert opened.unverified == ()
    assert open_note(note.decode("utf-8"), [verifier]) == opened


def test_example_note_rejects_every_changed_byte() -> None:
    note, verifier = _example()
    text_end = note.index(b"\n\n") + 1
    sig_start = note.rindex(b" ") + 1
    positions = [*range(text_end), *range(sig_start, len(note) - 1)]
    assert len(positions) > 100
    for pos in positions:
        for mask in (0x01, 0x20, 0x80):
            changed = bytearray(note)
            changed[pos] ^= mask
            with pytest.raises(NoteError):
                open_note(bytes(changed), [verifier])
    # ... and every other byte of the note too (separator, em dash, name, final newline).
    for pos in range(len(note)):
        changed = bytearray(note)
        changed[pos] ^= 0x01
        with pytest.raises(NoteError):
            open_note(bytes(changed), [verifier])


def test_example_note_with_other_keys_only() -> None:
    note, verifier = _example()
    with pytest.raises(UnverifiedNote, match="no signature by a known key"):
        open_note(note, [])
    other = Verifier.from_private_key("example.com/foo", _key(1))  # same name, other id
    with pytest.raises(UnverifiedNote):
        open_note(note, [other])
    renamed = Verifier("example.com/bar", verifier.key_id, verifier.public_key)  # same id
    with pytest.raises(UnverifiedNote):
        open_note(note, [renamed])


def test_spec_verifier_key_parses() -> None:
    v = parse_verifier_key(SPEC_VKEY)
    assert v.name == "example.com/foo"
    assert v.key_id.hex() == "530d903a"
    assert len(v.public_key) == 32
    assert key_id(v.name, v.public_key) == v.key_id
    assert verifier_key_string(v.name, v.public_key) == SPEC_VKEY
    assert v.key_string() == SPEC_VKEY
    assert parse_verifier_key(SPEC_VKEY.replace("530d903a", "530D903A")) == v


@pytest.mark.parametrize(
    ("key", "match"),
    [
        ("example.com/foo+530d903a", "<name>"),
        ("+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "name"),
        ("example com+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "name"),
        ("a+b+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "8 hex"),
        ("example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "not match"),
        ("example.com/bar+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "not match"),
        ("example.com/foo+530d903+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "8 hex"),
        ("example.com/foo+530d903a+AkyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "base64"),
        ("example.com/foo+530d903a+AukyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "type"),
        ("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k\n", "base64"),
        ("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYc", "32"),
    ],
)
def test_bad_verifier_keys(key: str, match: str) -> None:
    with pytest.raises(MalformedVerifierKey, match=match):
        parse_verifier_key(key)


_NAME_CHARS = st.characters(
    blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp"), blacklist_characters="+\x85"
)


@settings(max_examples=200, deadline=None)
@given(
    name=st.text(_NAME_CHARS, min_size=1, max_size=40).filter(
        lambda n: not any(c.isspace() for c in n)
    ),
    seed=st.binary(min_size=32, max_size=32),
)
def test_any_key_string_reads_back_whatever_its_base64_holds(name: str, seed: bytes) -> None:
    """A key's base64 holds '+' for about half of all keys: each one reads back as itself,
    and a note it signs opens under the key read back."""
    verifier = Verifier.from_private_key(name, Ed25519PrivateKey.from_private_bytes(seed))
    text = verifier.key_string()
    assert parse_verifier_key(text) == verifier
    note = sign_note("hello\n", name, Ed25519PrivateKey.from_private_bytes(seed))
    assert open_note(note, [parse_verifier_key(text)]).text == "hello\n"


def test_key_strings_whose_base64_holds_a_plus_are_among_those_read() -> None:
    """The case the old parser refused (it split at every '+'), made certain."""
    seeds = (bytes([i]) * 32 for i in range(256))
    keys = (
        Verifier.from_private_key("log.example", Ed25519PrivateKey.from_private_bytes(s))
        for s in seeds
    )
    plus = next(k for k in keys if "+" in k.key_string().split("+", 2)[2])
    assert parse_verifier_key(plus.key_string()) == plus


@pytest.mark.parametrize("name", ["", "a b", "a+b", "a\tb", "a\u00a0b", "a\u2003b", "a\nb"])
def test_bad_key_names(name: str) -> None:
    with pytest.raises(InvalidKeyName):
        key_id(name, bytes(32))
    with pytest.raises(InvalidKeyName):
        sign_note("text\n", name, _key(0))


# --------------------------------------------------------------------------------------------
# Signing and opening


def test_sign_open_round_trip() -> None:
    key = _key(0)
    verifier = Verifier.from_private_key("log.example/test", key)
    note = sign_note("hello\nworld\n", "log.example/test", key)
    sig_line = note.splitlines()[-1]
    assert note.startswith("hello\nworld\n\n" + EM + " log.example/test ")
    assert len(base64.b64decode(sig_line.split(" ")[-1])) == 4 + 64
    opened = open_note(note, [verifier])
    assert opened.text == "hello\nworld\n"
    assert opened.signatures[0].key_id == verifier.key_id
    assert parse_verifier_key(verifier.key_string()) == verifier


def test_multiple_signatures_and_unknown_keys() -> None:
    text = "origin\n1\nabc\n"
    k1, k2, k3 = _key(1), _key(2), _key(3)
    v1 = Verifier.from_private_key("one", k1)
    v2 = Verifier.from_private_key("two", k2)
    lines = [sign_note(text, n, k).split("\n\n", 1)[1] for n, k in [("one", k1), ("two", k2)]]
    unknown = sign_note(text, "three", k3).split("\n\n", 1)[1]
    note = text + "\n" + unknown + lines[0] + lines[1]
    opened = open_note(note, [v1, v2])
    assert [s.name for s in opened.signatures] == ["one", "two"]
    assert [s.name for s in opened.unverified] == ["three"]
    assert [s.name for s in open_note(note, [v2]).signatures] == ["two"]
    # An unknown key's bad signature is ignored; a known key's bad signature is fatal.
    garbage = f"{EM} three {base64.b64encode(b'abcd' + bytes(64)).decode()}\n"
    assert open_note(text + "\n" + garbage + lines[0], [v1]).text == text
    forged = f"{EM} two {base64.b64encode(v2.key_id + bytes(64)).decode()}\n"
    with pytest.raises(InvalidSignature, match="two"):
        open_note(text + "\n" + lines[0] + forged, [v1, v2])
    wrong_text = sign_note("other\n", "two", k2).split("\n\n", 1)[1]
    with pytest.raises(InvalidSignature):
        open_note(text + "\n" + lines[0] + wrong_text, [v1, v2])


def test_signature_count_limit() -> None:
    text = "t\n"
    key = _key(0)
    verifier = Verifier.from_private_key("k", key)
    signed = sign_note(text, "k", key).split("\n\n", 1)[1]
    filler = f"{EM} other {base64.b64encode(b'wxyz' + bytes(64)).decode()}\n"
    ok = text + "\n" + signed + filler * (MAX_SIGNATURES - 1)
    assert open_note(ok, [verifier]).text == text
    with pytest.raises(TooManySignatures, match="at most 100"):
        open_note(ok + filler, [verifier])


@pytest.mark.parametrize(
    "text",
    [
        "\n",
        "a\n\nb\n",
        "ends with a blank line\n\n",
        f"{EM} looks like a signature line\n\n{EM} k AAAAAAAA\n",
        "unicode: caf\u00e9 \u2603 \U0001f600\n",
    ],
)
def test_tricky_texts_round_trip(text: str) -> None:
    key = _key(0)
    verifier = Verifier.from_private_key("k", key)
    assert open_note(sign_note(text, "k", key), [verifier]).text == text


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(
        st.characters(blacklist_categories=("Cs", "Cc")) | st.just("\n") | st.just(EM),
        max_size=80,
    )
)
def test_any_text_round_trips(text: str) -> None:
    text += "\n"
    key = _key(0)
    verifier = Verifier.from_private_key("k", key)
    assert open_note(sign_note(text, "k", key), [verifier]).text == text


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        ("no newline", "end with a newline"),
        ("tab\there\n", "control character"),
        ("cr\r\n", "control character"),
        ("bad surrogate \ud800\n", "UTF-8"),
    ],
)
def test_sign_rejects_bad_text(text: str, match: str) -> None:
    with pytest.raises(MalformedNote, match=match):
        sign_note(text, "k", _key(0))


def _good_note() -> tuple[str, Verifier]:
    key = _key(0)
    return sign_note("text\n", "k", key), Verifier.from_private_key("k", key)


@pytest.mark.parametrize(
    ("mutate", "error", "match"),
    [
        (lambda n: n.replace("\n\n", "\n"), MalformedNote, "no blank line"),
        (lambda n: n[:-1], MalformedNote, "end with a newline"),
        (lambda n: n + "\n", MalformedNote, "no signature lines"),
        (lambda n: n.replace(EM, "-"), MalformedNote, "em dash"),
        (lambda n: n.replace(EM + " ", EM), MalformedNote, "em dash"),
        (lambda n: n.replace(" k ", " k  "), MalformedNote, "must be"),
        (lambda n: n.replace("text", "te\x00xt"), MalformedNote, "control"),
        (lambda n: n.replace("text", "te\x7fxt"), InvalidSignature, "does not verify"),
        (lambda n: n[:-2] + "!\n", MalformedNote, "base64"),
        (lambda n: n.replace("=\n", "\n"), MalformedNote, "base64"),
        (lambda n: n.replace("\n\n", "\n\n" + EM + " k AAAA\n"), MalformedNote, "too short"),
        (lambda n: n + "trailing\n", MalformedNote, "em dash"),
        # An extra blank line becomes part of the text, which then no longer verifies.
        (lambda n: n.replace("text\n", "text\n\n"), InvalidSignature, "does not verify"),
    ],
)
def test_malformed_notes(mutate: Callable[[str], str], error: type[NoteError], match: str) -> None:
    note, verifier = _good_note()
    changed = mutate(note)
    assert changed != note
    with pytest.raises(error, match=match):
        open_note(changed, [verifier])


def test_non_utf8_and_non_canonical_base64() -> None:
    note, verifier = _good_note()
    with pytest.raises(MalformedNote, match="UTF-8"):
        open_note(note.encode() + b"\xff", [verifier])
    with pytest.raises(MalformedNote, match="UTF-8"):
        open_note(b"\xc3(\n\n" + note.encode().split(b"\n\n", 1)[1], [verifier])
    # Change only the unused low bits of the last base64 character: same bytes, not canonical.
    b64 = note.rstrip("\n").split(" ")[-1]
    assert b64.endswith("=") and not b64.endswith("==")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet.index(b64[-2])
    assert last % 4 == 0  # 68 bytes: the last character carries 4 data bits and 2 zero bits
    sloppy = b64[:-2] + alphabet[last | 1] + "="
    assert base64.b64decode(sloppy) == base64.b64decode(b64)
    with pytest.raises(MalformedNote, match="canonical"):
        open_note(note.replace(b64, sloppy), [verifier])
    urlsafe = base64.urlsafe_b64encode(base64.b64decode(b64)).decode()
    if urlsafe != b64:
        with pytest.raises(MalformedNote, match="base64"):
            open_note(note.replace(b64, urlsafe), [verifier])


# --------------------------------------------------------------------------------------------
# Checkpoints


ROOT = hashlib.sha256(b"some root").digest()


def test_checkpoint_format_and_parse() -> None:
    text = format_checkpoint("example.com/log", 20852163, ROOT)
    assert text == f"example.com/log\n20852163\n{base64.b64encode(ROOT).decode()}\n"
    cp = parse_checkpoint(text)
    assert cp == Checkpoint("example.com/log", 20852163, ROOT, ())
    assert cp.text() == text
    with_ext = format_checkpoint("o", 0, EMPTY_ROOT, ["ext one", "ext two"])
    assert parse_checkpoint(with_ext) == Checkpoint("o", 0, EMPTY_ROOT, ("ext one", "ext two"))


def test_signed_checkpoint_round_trip() -> None:
    key = _key(7)
    verifier = Verifier.from_private_key("example.com/log", key)
    note = sign_note(format_checkpoint("example.com/log", 5, ROOT), "example.com/log", key)
    cp, opened = open_checkpoint(note, [verifier], origin="example.com/log")
    assert cp == Checkpoint("example.com/log", 5, ROOT)
    assert opened.signatures[0].name == "example.com/log"
    with pytest.raises(MalformedCheckpoint, match="origin"):
        open_checkpoint(note, [verifier], origin="example.com/other")
    with pytest.raises(UnverifiedNote):
        open_checkpoint(note, [])


@settings(max_examples=100, deadline=None)
@given(
    size=st.integers(0, 2**64 - 1),
    root=st.binary(min_size=32, max_size=32),
    extensions=st.lists(
        st.text(
            st.characters(blacklist_categories=("Cs", "Cc")),
            min_size=1,
            max_size=20,
        ),
        max_size=3,
    ),
)
def test_checkpoint_round_trip(size: int, root: bytes, extensions: list[str]) -> None:
    text = format_checkpoint("example.com/log", size, root, extensions)
    assert parse_checkpoint(text) == Checkpoint("example.com/log", size, root, tuple(extensions))


R64 = base64.b64encode(ROOT).decode()
URLSAFE = base64.urlsafe_b64encode(bytes([0xFF]) * 32).decode()


@pytest.mark.parametrize(
    "text",
    [
        f"o\n1\n{R64}",  # no final newline
        "o\n1\n",  # no root line
        f"\n1\n{R64}\n",  # empty origin
        f"o\n01\n{R64}\n",  # leading zero
        f"o\n00\n{R64}\n",
        f"o\n+1\n{R64}\n",
        f"o\n-1\n{R64}\n",
        f"o\n 1\n{R64}\n",
        f"o\n1 \n{R64}\n",
        f"o\n\n{R64}\n",
        f"o\n0x10\n{R64}\n",
        f"o\n1_000\n{R64}\n",
        f"o\n\u0661\n{R64}\n",  # Arabic-Indic digit one
        f"o\n{2**64}\n{R64}\n",
        f"o\n1\n{R64[:-1]}\n",  # bad padding
        f"o\n1\n{base64.b64encode(ROOT[:31]).decode()}\n",  # 31-byte root
        f"o\n1\n{base64.b64encode(ROOT + b'x').decode()}\n",  # 33-byte root
        f"o\n1\n{URLSAFE}\n",  # URL-safe alphabet
        f"o\n1\n{R64}\n\n",  # empty extension line
        f"o\n1\n{R64}\next\n\n",
        f"o\x01\n1\n{R64}\n",
    ],
)
def test_checkpoint_strict_parsing(text: str) -> None:
    with pytest.raises(MalformedCheckpoint):
        parse_checkpoint(text)


def test_checkpoint_format_rejects_bad_fields() -> None:
    with pytest.raises(MalformedCheckpoint, match="origin"):
        format_checkpoint("", 1, ROOT)
    with pytest.raises(MalformedCheckpoint, match="origin"):
        format_checkpoint("a\nb", 1, ROOT)
    with pytest.raises(MalformedCheckpoint, match="size"):
        format_checkpoint("o", -1, ROOT)
    with pytest.raises(MalformedCheckpoint, match="size"):
        format_checkpoint("o", 2**64, ROOT)
    with pytest.raises(MalformedCheckpoint, match="root"):
        format_checkpoint("o", 1, ROOT[:31])
    with pytest.raises(MalformedCheckpoint, match="extension"):
        format_checkpoint("o", 1, ROOT, [""])
    with pytest.raises(MalformedCheckpoint, match="extension"):
        format_checkpoint("o", 1, ROOT, ["a\nb"])
