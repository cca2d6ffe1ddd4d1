"""DSSE envelopes over in-toto statements (DSSE v1 protocol).

``signature = Ed25519(PAE(payloadType, payload))``. Verification fails closed: the envelope
must be well formed, its payload canonical base64 of a JSON statement, and its signature must
verify under the key its ``keyid`` names *and* that key must be one the caller trusts.

This ledger's profile of DSSE: an envelope carries **exactly one** signature. With one, there
is no choice of which signature counts (admission and re-verification could otherwise pick
differently), and a signed statement has one spelling per signer, so nobody can make a "new"
event out of someone else's by adding, dropping or reordering signatures.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import pickle
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

import msgspec

from domain.canonical import (
    DIGEST_PREFIX,
    canonical_b64decode,
    canonical_json,
    plain_json,
    sha256_hex,
)
from domain.documents import parse_admitted_json, parse_json
from domain.errors import CanonicalizationError, DomainError, ParseError
from domain.statements import PAYLOAD_TYPE, parse_statement
from ledger.signing.keys import PublicKey, SigningKey

if TYPE_CHECKING:
    # The statement models are made on first use (domain.statements): a process that
    # reads without checking a statement (a read command) never makes them.
    # Where a model is needed as a value, the function that needs it imports it.
    from domain.statements import Statement

SIGNATURES = 1  # exactly this many per envelope (see the module docstring)
# A statement carries manifests of up to 1 MiB each; base64 of this fits a 2 MiB request body.
MAX_PAYLOAD_BYTES = 3 * 1024 * 1024 // 2
MAX_ENVELOPE_BYTES = 2 * 1024 * 1024  # the serialised envelope: payload in base64 + signatures


class EnvelopeError(DomainError):
    """The envelope is malformed (shape, base64, payload JSON)."""

    code = "malformed-envelope"


class SignatureError(DomainError):
    """No signature on the envelope verifies under a key we trust."""

    code = "bad-signature"


class UnknownKeyError(SignatureError):
    code = "unknown-key"

    @classmethod
    def naming(cls, keyid: str) -> UnknownKeyError:
        """The refusal of an envelope whose key id names no registered key. The id is the
        client's, unverified and of any length: a long one is shown cut (the reply and the
        log echo it)."""
        shown = (
            keyid
            if len(keyid) <= _KEYID_SHOWN
            else f"{keyid[:_KEYID_SHOWN]}… ({len(keyid)} characters)"
        )
        return cls(f"no signature is by a registered key (keyid {shown or '(empty)'})")


_KEYID_SHOWN = 80  # a key id is 71 characters


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding: ``DSSEv1 SP len(t) SP t SP len(b) SP b``."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _b64decode_strict(text: object, what: str) -> bytes:
    # One envelope has one spelling: non-canonical base64 (stray padding bits) is refused.
    if type(text) is str and (found := _b64_fast(text)) is not None:
        return found
    try:
        return canonical_b64decode(text, what)
    except CanonicalizationError as exc:
        raise EnvelopeError(exc.message) from None


def _b64_fast(text: str) -> bytes | None:
    """The bytes ``canonical_b64decode`` gives ``text``, or None to let it decide (and say
    why). msgspec's decoder takes only standard, padded base64 (the alphabet, a length of a
    multiple of 4, ``=`` only as the last group's padding) and is ~5x faster than binascii
    on a payload. A group of four characters without padding uses all its 24 bits, so only
    a padded last group can spell its bytes another way: by setting the bits its last data
    character carries beyond the bytes (4 before ``==``, 2 before ``=``), which the
    canonical spelling leaves clear. Exhaustively tested over every last group against
    ``canonical_b64decode`` (tests/ledger/test_dsse_fast_paths.py)."""
    try:
        raw = msgspec.convert(text, bytes)
    except (msgspec.ValidationError, UnicodeEncodeError):  # a lone surrogate has no UTF-8
        return None
    size = len(raw)
    if len(text) != 4 * ((size + 2) // 3):  # one spelling has exactly this length
        return None
    spare = size % 3  # bytes in a padded last group: 1 before "==", 2 before "="
    if spare == 0:
        return raw
    if spare == 1:
        return raw if text[-3] in _LOW4_CLEAR and text[-2:] == "==" else None
    return raw if text[-2] in _LOW2_CLEAR and text[-1] == "=" else None


# The base64 digits whose 6 bits end in 4 (2) clear bits: the only ones that can end the data
# of a last group padded with "==" ("=") in its canonical spelling (values 0, 16, 32, 48;
# every fourth value).
_LOW4_CLEAR = frozenset("AQgw")
_LOW2_CLEAR = frozenset("AEIMQUYcgkosw048")


V = TypeVar("V")


class _made_once(Generic[V]):
    """``functools.cached_property`` without its lock: on 3.11 it takes one lock shared by
    every instance of the class on each first read (~0.3 µs an envelope each, and a wait for
    whichever thread reads another envelope's meanwhile). An envelope's cached values are
    made from its fields alone, so two threads making one at once make equal values."""

    def __init__(self, make: Callable[[Any], V]) -> None:
        self._make = make
        self._name = make.__name__
        self.__doc__ = make.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> Self: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> V: ...

    def __get__(self, instance: object, owner: type | None = None) -> V | Self:
        if instance is None:
            return self
        # Stored in the instance's __dict__: later reads find it there, never calling this.
        value = instance.__dict__[self._name] = self._make(instance)
        return value


# A msgspec Struct, not a dataclass (~4 M instructions to make on 3.11, at every start of a
# command that reads envelopes); dict=True: room for the cached properties.
class Envelope(msgspec.Struct, frozen=True, dict=True):
    """A parsed DSSE envelope; ``raw`` is the JSON object exactly as received."""

    payload_type: str
    payload: bytes
    signatures: tuple[tuple[str, bytes], ...]
    raw: Mapping[str, Any]
    # The JCS bytes of ``raw`` when the envelope was parsed with them made (see
    # ``canonical``), or None: then it was of plain JSON types only, which always have them.
    # Made from ``raw`` alone, so two envelopes of equal ``raw`` have equal ``made``.
    made: bytes | None

    @_made_once
    def canonical(self) -> bytes:
        """The JCS bytes of ``raw``, made once: its digest is taken over these, not a second
        serialisation. Made on first use where parsing could tell they exist (a verifier
        never asks: the log entry's leaf hash covers the envelope already)."""
        if self.made is not None:
            return self.made
        if _still_plain(self.raw):
            return plain_json(self.raw)  # the same bytes, without ``canonical_json``'s walk
        return canonical_json(dict(self.raw))

    @_made_once
    def digest(self) -> str:
        """sha256 over the JCS form of the envelope: identical envelopes, identical digest."""
        return DIGEST_PREFIX + sha256_hex(self.canonical)

    @property
    def keyid(self) -> str:
        """The key id the envelope's one signature names (a hint until verified)."""
        return self.signatures[0][0]

    @_made_once
    def signed_digest(self) -> str:
        """What was signed, by whom: sha256 over the PAE bytes and the named key id. The
        ledger recognises a resubmission by this, never by the envelope's bytes."""
        found = signed_digest(self.payload_type, self.payload, self.keyid)
        _remember_signed_digest(self.raw, found)
        return found

    def statement_json(self) -> Any:
        """The signed statement, read as strictly as any document: a payload two JSON readers
        could read differently (duplicate keys, NaN, an integer no float reads back as) is
        refused, not guessed. Numbers are RFC 8785's IEEE doubles: an integer literal beyond
        2^53 is read as the float it spells, exactly or in JCS's own spelling
        (``domain.documents.json_integer``); a reader that keeps such literals as exact
        integers gets another value, and cannot canonicalise it either."""
        try:
            return parse_json(self.payload, max_bytes=MAX_PAYLOAD_BYTES)
        except ParseError as exc:
            raise EnvelopeError(
                f"payload is not a UTF-8 JSON document we accept: {exc.message}"
            ) from (None)

    @_made_once
    def _statement(self) -> Statement:
        return parse_statement(self.statement_json())

    def statement(self) -> Statement:
        """The signed statement, validated once per envelope however many read it (the
        edge, then the ledger)."""
        return self._statement

    def __setstate__(self, state: object) -> None:
        """Refused: an envelope's pickle is its fields alone (msgspec's ``__reduce__``), and
        its cached values (``signed_digest``, ``canonical``, ``digest``, the statement) are
        made by the process that holds it from those fields. Only a hand-made pickle brings
        state: it would set them (a writer's unpickler loads a worker's pickled request), so
        that a verdict or a resubmission is matched against a digest nobody computed here."""
        raise pickle.UnpicklingError("an envelope's pickle carries its fields only")


def parse_envelope(value: object) -> Envelope:
    """Check the envelope's shape and decode it; raise EnvelopeError with what is wrong."""
    # Exact dicts and lists (what a JSON reader gives) skip the ABC checks: admission and
    # every verifier parse each envelope here.
    if type(value) is not dict and not isinstance(value, Mapping):
        raise EnvelopeError("envelope must be a JSON object")
    if not value.keys() <= _ENVELOPE_FIELDS:  # a subset test makes no set; the message does
        unknown = value.keys() - _ENVELOPE_FIELDS
        raise EnvelopeError(f"envelope has unknown fields: {', '.join(sorted(unknown))}")
    payload_type = value.get("payloadType")
    if payload_type != PAYLOAD_TYPE:
        raise EnvelopeError(f"payloadType must be {PAYLOAD_TYPE!r}, got {payload_type!r}")
    payload = _b64decode_strict(value.get("payload"), "payload")
    signatures = value.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise EnvelopeError("envelope needs exactly one signature")
    if len(signatures) != SIGNATURES:
        raise EnvelopeError(
            f"envelope has {len(signatures)} signatures; this ledger's envelopes carry exactly one"
        )
    item = signatures[0]  # the one signature
    if (
        type(item) is not dict and not isinstance(item, Mapping)
    ) or not item.keys() <= _SIGNATURE_FIELDS:
        raise EnvelopeError("signatures[0] must be an object with keyid and sig only")
    # DSSE makes the key id optional; this ledger's profile (DESIGN.md §5, and the API's
    # schema) requires it: it names the one key the signature is checked under.
    keyid = item.get("keyid")
    if not isinstance(keyid, str):
        raise EnvelopeError("signatures[0].keyid must be a string naming the signing key")
    parsed = ((keyid, _b64decode_strict(item.get("sig"), "signatures[0].sig")),)
    if _plain_envelope(value, item, keyid):
        return Envelope(payload_type, payload, parsed, value, None)
    try:
        canonical = canonical_json(dict(value))
    except DomainError as exc:
        raise EnvelopeError(f"envelope is not canonicalisable: {exc.message}") from None
    return Envelope(payload_type, payload, parsed, value, canonical)


_ENVELOPE_FIELDS = frozenset({"payloadType", "payload", "signatures"})
_SIGNATURE_FIELDS = frozenset({"keyid", "sig"})


def _plain_envelope(value: Mapping[str, Any], item: Mapping[str, Any], keyid: str) -> bool:
    """Whether an envelope whose shape ``parse_envelope`` has checked (``item`` its one
    signature) is made of exact JSON types only (what a JSON reader gives), whose JCS bytes
    always exist: its strings are the payload type and base64 (ASCII) but for the key id,
    which holds no lone surrogate (the one thing of such a value that has no UTF-8, so no
    JCS). Anything else has its bytes made when parsed, which refuses what has none."""
    if not (
        type(value) is dict
        and type(item) is dict
        and type(value["signatures"]) is list
        and type(value["payloadType"]) is str
        and type(value["payload"]) is str
        and type(keyid) is str
        and type(item["sig"]) is str
    ):
        return False
    for key in value:
        if type(key) is not str:
            return False
    for key in item:
        if type(key) is not str:
            return False
    if keyid.isascii():
        return True
    try:
        keyid.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _still_plain(raw: Mapping[str, Any]) -> bool:
    """Whether ``raw`` is (still, when its JCS is asked for) an exact dict of the envelope's
    fields only, each an exact ``str`` but ``signatures``, an exact list of one exact dict of
    ``keyid`` and ``sig`` only, exact ``str`` too: what ``_plain_envelope`` accepts. Its keys
    are then these ASCII names (a subset of them, each of type ``str``) and its values strings,
    so its JCS bytes are ``plain_json``'s. Checked again, not assumed from the parse: ``raw``
    is the caller's dict, and anything else goes to ``canonical_json``."""
    if type(raw) is not dict or not raw.keys() <= _ENVELOPE_FIELDS:
        return False
    signatures = raw.get("signatures")
    if type(signatures) is not list or len(signatures) != SIGNATURES:
        return False
    item = signatures[0]
    if type(item) is not dict or not item.keys() <= _SIGNATURE_FIELDS:
        return False
    for mapping in (raw, item):
        for key, value in mapping.items():
            if type(key) is not str or (key != "signatures" and type(value) is not str):
                return False
    return True


def signed_digest(payload_type: str, payload: bytes, keyid: str) -> str:
    """``sha256:`` + hex SHA-256 of ``len(keyid) SP keyid SP PAE(payload_type, payload)``."""
    named = keyid.encode("utf-8")
    t = payload_type.encode("utf-8")
    # The bytes before the payload, then the payload itself: the same message as
    # ``b"%d %s " % (len(named), named) + pae(...)`` without copying the payload twice.
    hashed = hashlib.sha256(
        b"%d %s DSSEv1 %d %s %d " % (len(named), named, len(t), t, len(payload))
    )
    hashed.update(payload)
    return "sha256:" + hashed.hexdigest()


def stored_signed_digest(raw: Mapping[str, Any]) -> str:
    """:func:`signed_digest` of an envelope the ledger stored (it parsed it at admission).

    Memoised on the envelope's payload type, payload text and key id (what it is a pure
    function of): the aggregate an admitted envelope creates asks for it again right away,
    and each replay of a run asks for every envelope of it."""
    key, payload = _signed_digest_key(raw)
    found = _SIGNED_DIGESTS.get(key)
    if found is not None and found[0] == payload:
        return found[1]
    digest = signed_digest(key[0], base64.b64decode(payload), key[1])
    _remember_signed_digest(raw, digest, (key, payload))
    return digest


# The memo's key is the payload type, key id and signature text, and the payload text is
# compared on a hit, not hashed: a fresh payload's hash (3.5 KB of SipHash for an
# ingestion) was most of remembering one, in every process that parses envelopes. Two
# envelopes alike but for their payload share a key: the later one's entry replaces the
# other's, and a hit is still only ever for the very payload text that was digested.
_Key = tuple[str, str, str]


def _signed_digest_key(raw: Mapping[str, Any]) -> tuple[_Key, str]:
    signature = raw["signatures"][0]
    return (
        (str(raw["payloadType"]), str(signature["keyid"]), str(signature.get("sig"))),
        str(raw["payload"]),
    )


_SIGNED_DIGESTS: dict[_Key, tuple[str, str]] = {}  # key → (payload text, signed digest)
_SIGNED_DIGESTS_KEPT = 1 << 14
# The memo holds payloads: bounded in bytes as well as entries (a server reads any body a
# client sends, up to 2 MiB each), and a payload past 64 KiB (no envelope this ledger
# writes is near it) is not kept at all.
_SIGNED_DIGESTS_BYTES = 64 << 20
_SIGNED_DIGEST_LARGEST = 64 << 10
_signed_digests_bytes = 0
_SIGNED_DIGESTS_LOCK = threading.Lock()


def _remember_signed_digest(
    raw: Mapping[str, Any], digest: str, keyed: tuple[_Key, str] | None = None
) -> None:
    """Remember ``digest`` as the signed digest of ``raw`` (only ever the value
    :func:`signed_digest` computes from it: a parsed envelope's payload is the strict
    decoding of the text the key holds, which the lenient one reads alike)."""
    global _signed_digests_bytes  # noqa: PLW0603 - the memo's own running size
    key, payload = keyed if keyed is not None else _signed_digest_key(raw)
    size = len(key[0]) + len(key[1]) + len(key[2]) + len(payload)
    if size > _SIGNED_DIGEST_LARGEST:
        return
    with _SIGNED_DIGESTS_LOCK:  # a server's loop and its threads remember at once
        if (
            len(_SIGNED_DIGESTS) >= _SIGNED_DIGESTS_KEPT
            or _signed_digests_bytes + size > _SIGNED_DIGESTS_BYTES
        ):
            _SIGNED_DIGESTS.clear()
            _signed_digests_bytes = 0
        _SIGNED_DIGESTS[key] = (payload, digest)
        _signed_digests_bytes += size


def named_keyid(raw: object) -> str | None:
    """The key id an unparsed envelope's one signature names, if it has one (a hint: the
    only key its verification will look up)."""
    if type(raw) is dict:  # what a JSON reader gives: no ABC check (every bundle line asks)
        signatures = raw.get("signatures")
        if type(signatures) is list and len(signatures) == SIGNATURES:
            item = signatures[0]
            keyid = item.get("keyid") if type(item) is dict else None
            if type(keyid) is str:
                return keyid
    signatures = raw.get("signatures") if isinstance(raw, Mapping) else None
    if not isinstance(signatures, list) or len(signatures) != SIGNATURES:
        return None
    keyid = signatures[0].get("keyid") if isinstance(signatures[0], Mapping) else None
    return keyid if isinstance(keyid, str) else None


def stored_payload(text: Any) -> bytes:
    """The payload of an envelope the ledger stored, from its base64 text: what binascii's
    lenient decoder reads, at msgspec's speed (~4x) where the text is standard padded base64
    (as every admitted one is), which both decoders read alike; binascii decides the rest."""
    if type(text) is str:
        try:
            return msgspec.convert(text, bytes)
        except (msgspec.ValidationError, UnicodeEncodeError):
            pass
    return binascii.a2b_base64(text)


def stored_statement(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The statement inside an envelope the ledger stored (decoded, not verified: it was
    verified at admission; readers that must not trust the store re-verify instead)."""
    # The value admission read (``Envelope.statement_json``), at msgspec's speed where it can
    # only be the same: a rebuild reads every payload.
    statement: dict[str, Any] = parse_admitted_json(stored_payload(raw["payload"]))
    return statement


def sign_envelope(statement: Mapping[str, Any], key: SigningKey) -> dict[str, Any]:
    """Serialise ``statement`` (JCS) and wrap it in a DSSE envelope signed by ``key``."""
    payload = canonical_json(dict(statement))
    sig = key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": key.key_id, "sig": base64.b64encode(sig).decode("ascii")}],
    }


KeyResolver = Callable[[str], PublicKey | None]


def signed_by(envelope: Envelope, key: PublicKey) -> bool:
    """Whether the envelope's one signature is ``key``'s over its PAE bytes, under the key
    id it names (the only place a signature is checked). ``PublicKey.verify`` holds it to
    ``ed25519_strict``: a small-order key or R, or an unreduced S, verifies nothing, so
    admission and every verifier refuse the same signatures whichever library they use."""
    keyid, sig = envelope.signatures[0]
    return key.key_id == keyid and key.verify(sig, pae(envelope.payload_type, envelope.payload))


def verify_envelope(envelope: Envelope, resolve: KeyResolver) -> str:
    """The key id of the envelope's signature, if it verifies under the key ``resolve``
    trusts for that id. Raises UnknownKeyError when ``resolve`` knows no such key,
    SignatureError when the signature does not verify under it.

    Only says that a key signed: whether that key may sign the statement is
    ``ledger.authority``'s to decide.
    """
    keyid = envelope.keyid
    key = resolve(keyid)
    if key is None:
        raise UnknownKeyError.naming(keyid)
    # Defence in depth: the resolver must hand back the key the id names.
    if not signed_by(envelope, key):
        raise SignatureError("signature does not verify under the key it names")
    return keyid
