"""RFC 8785 (JCS) canonical JSON and the sha256 digests computed over it."""

from __future__ import annotations

import binascii
import hashlib
import math
import re
from typing import Any

import msgspec
import rfc8785

from domain.errors import CanonicalizationError

DIGEST_PREFIX = "sha256:"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


# JCS's integer bound (I-JSON): beyond it a value has no canonical form here.
MAX_SAFE_INTEGER = 2**53 - 1
_SAFE_INTEGER = MAX_SAFE_INTEGER


_PLAIN, _FLOATS, _OTHER = 0, 1, 2
# Where a float that is not whole is written alike by repr (the C encoder's spelling) and
# ES6's Number::toString: plain decimal notation, the shortest digits that read back.
_REPR_IS_ES6_LOW, _REPR_IS_ES6_HIGH = 1e-4, 1e16
# How the C encoder writes a float's stand-in (see ``_floats_as_tokens``).
_FLOAT_TOKEN = re.compile(rb'"\\u0000([0-9]+)\\u0000"')
# In the C encoder's compact text of an object, where it may spell a float otherwise than
# ES6: an exponent ending a token (``1e16``, ``1e-7``), or a ``.0`` ending one (a whole
# float); a token inside an object ends at ``,``, ``]`` or ``}``. Text in a string may match
# too (then the general path decides), never the other way round (property-tested against
# rfc8785). Two searches, each from a literal (``re`` scans for it at C speed; one pattern
# with both took 16 µs on a run manifest, these ~0.7).
_EXPONENT_ENDING = re.compile(rb"e[-+]?[0-9]+[,\]}]")
_POINT_ZERO_ENDING = re.compile(rb"\.0[,\]}]")


def _shape(value: Any) -> int:
    """How ``canonical_json`` writes a value: ``_PLAIN``, made only of objects with ASCII
    keys, arrays, strings, booleans, null, integers within ±(2^53−1) (exact types: no
    subclasses) and floats that are not whole with 1e-4 ≤ |x| < 1e16 (the C encoder writes
    those as ES6 does: a run's measurements, mostly), goes to the C encoder; ``_FLOATS``,
    plain but for other finite floats and with no NUL in any string (the floats' stand-ins
    are NUL-delimited), goes to it with stand-ins;
    ``_OTHER`` goes to rfc8785. A loop, not recursion: depth cannot exhaust the stack."""
    stack = [value]
    floats = nul = False
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            nul = nul or "\x00" in item
        elif kind is dict:
            keys = _key_shape(item)
            if keys == _OTHER:
                return _OTHER
            nul = nul or keys == _NUL
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is int:
            if not -_SAFE_INTEGER <= item <= _SAFE_INTEGER:
                return _OTHER
        elif kind is float:
            if not math.isfinite(item):
                return _OTHER  # rfc8785 says why NaN and Infinity have no canonical form
            # Not whole and within [1e-4, 1e16): the C encoder writes Python's repr, which
            # is ES6's spelling there (``es6_number``); any other float needs a stand-in.
            floats = (
                floats or item.is_integer() or not _REPR_IS_ES6_LOW <= abs(item) < _REPR_IS_ES6_HIGH
            )
        elif kind is not bool and item is not None:
            return _OTHER
    if not floats:
        return _PLAIN
    return _OTHER if nul else _FLOATS


_NUL = 3


def _key_shape(item: dict[Any, Any]) -> int:
    """``_OTHER`` if a key is not an ASCII string (UTF-16 order, or not a string at all:
    rfc8785's to judge); ``_NUL`` if one holds a NUL; else ``_PLAIN``."""
    found = _PLAIN
    for key in item:
        if type(key) is not str or not key.isascii():
            return _OTHER
        if "\x00" in key:
            found = _NUL
    return found


def _plain(value: Any) -> bool:
    return _shape(value) == _PLAIN


def _floats_as_tokens(value: Any, floats: list[bytes]) -> Any:
    """``value`` with each float replaced by the string ``"\\x00<n>\\x00"``, n its place in
    ``floats``, which receives the float's JCS spelling (ES6 ``Number::toString``, written by
    ``rfc8785``). Only the containers on the way to a float are copied; the rest is shared."""
    kind = type(value)
    if kind is float:
        floats.append(es6_number(value))
        return f"\x00{len(floats) - 1}\x00"
    if kind is dict:
        copied: dict[str, Any] | None = None
        for key, item in value.items():
            if type(item) in _CONTAINERS_OR_FLOAT:
                new = _floats_as_tokens(item, floats)
                if new is not item:
                    copied = dict(value) if copied is None else copied
                    copied[key] = new
        return value if copied is None else copied
    if kind is list:
        listed: list[Any] | None = None
        for index, item in enumerate(value):
            if type(item) in _CONTAINERS_OR_FLOAT:
                new = _floats_as_tokens(item, floats)
                if new is not item:
                    listed = list(value) if listed is None else listed
                    listed[index] = new
        return value if listed is None else listed
    return value


_CONTAINERS_OR_FLOAT = frozenset({dict, list, float})


def es6_number(value: float) -> bytes:
    """A finite float as JCS writes it (ECMAScript's ``Number::toString``).

    Between 1e-4 and 1e16 Python's ``repr`` and ECMAScript both write the shortest digits
    that read back as the float, in plain decimal notation; they differ only in the ``.0``
    Python keeps on whole numbers. Outside that range (exponents, which the two place and
    spell differently) and for zero, ``rfc8785`` writes it. Property-tested against
    ``rfc8785`` (tests/domain/test_canonical_fast_path.py).
    """
    if 1e-4 <= abs(value) < 1e16:
        text = repr(value)
        return (text[:-2] if text.endswith(".0") else text).encode("ascii")
    return rfc8785.dumps(value)


def canonical_json(value: Any, *, json_read: bool = False) -> bytes:
    r"""The JCS bytes of a JSON value.

    Integers beyond ±(2^53−1) are refused (a JavaScript verifier could not read them back
    exactly); callers carry such values as strings.

    Values without floats or non-ASCII keys (envelopes, log entries, most statements) have
    one serialisation that JCS and a sorted-key C encoder agree on: the same string
    escapes (``\b \t \n \f \r``, other controls as lowercase ``\u00xx``, nothing else), the
    same integers, and ASCII keys sort alike by code point and by UTF-16 unit. Those are
    written by msgspec's C encoder, several times faster; so are floats that are not whole
    with 1e-4 ≤ |x| < 1e16, which it spells as repr does, ES6's spelling there. Other floats
    need their ES6 spelling from ``rfc8785``: the encoder writes the value with a stand-in
    string for each float, and each stand-in is then replaced by ``rfc8785``'s spelling of
    that float (~10x faster than ``rfc8785`` for all of a manifest). Non-ASCII keys
    and the rest go to ``rfc8785``. The two agree on every value the fast paths take
    (tests/domain/test_canonical_fast_path.py).

    ``json_read``: ``value`` is an object the strict JSON reader (``domain.documents``) read,
    or made of such values, strings and safe integers (a manifest's canonical form): exact
    JSON types, safe integers, no NUL or lone surrogate, which ``_shape`` would walk every
    value to learn. Then the C encoder's text is JCS's where it is ASCII (so are the keys,
    which sort alike then) and spells no float otherwise than ES6 (``_EXPONENT_ENDING``,
    ``_POINT_ZERO_ENDING``); any other text goes the general way.
    """
    if json_read and type(value) is dict:
        written = _c_encoded(value)
        if (
            written.isascii()
            and _EXPONENT_ENDING.search(written) is None
            and _POINT_ZERO_ENDING.search(written) is None
        ):
            return written
    shape = _shape(value)
    if shape == _PLAIN:
        return _c_encoded(value)
    if shape == _FLOATS:
        floats: list[bytes] = []
        try:
            tokened = _floats_as_tokens(value, floats)
        except RecursionError:
            tokened = None  # deeper than this stack: rfc8785 decides
        if tokened is not None:
            # The encoder writes every stand-in as "\u0000<n>\u0000" (NUL is escaped, and
            # no string of the value holds one), and nothing else of its output looks so.
            return _FLOAT_TOKEN.sub(lambda m: floats[int(m.group(1))], _c_encoded(tokened))
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError as exc:
        raise CanonicalizationError(
            f"{exc.args[0] if exc.args else 'integer out of range'}; carry it as a string"
        ) from None
    except rfc8785.FloatDomainError:
        raise CanonicalizationError("NaN and Infinity have no canonical JSON form") from None
    except rfc8785.CanonicalizationError as exc:
        raise CanonicalizationError(f"value has no canonical JSON form: {exc}") from None
    except UnicodeEncodeError:  # rfc8785 lets this out for a lone surrogate in a key
        raise CanonicalizationError(
            "value has no canonical JSON form: a key holds a lone surrogate"
        ) from None


def _c_encoded(value: Any) -> bytes:
    """msgspec's encoding with sorted keys, which is JCS's spelling on every value ``_shape``
    does not call ``_OTHER`` (floats apart, which it never sees): the same string escapes,
    integers and, for ASCII keys, order (tests/domain/test_canonical_fast_path.py); about
    ten times faster than ``json.dumps(sort_keys=True)``."""
    try:
        return msgspec.json.encode(value, order="sorted")
    except UnicodeEncodeError:  # a lone surrogate: UTF-8 has no bytes for it
        raise CanonicalizationError(
            "value has no canonical JSON form: a string holds a lone surrogate"
        ) from None


def plain_json(value: Any) -> bytes:
    """The JCS bytes of a value its caller has proved plain without walking it: exact
    dicts whose keys are ASCII ``str``, lists, ``str``, ``bool``, ``None`` and integers
    within ±(2^53−1), no float (``_shape`` would call it ``_PLAIN``). Then they are the C
    encoder's (``_c_encoded``; a lone surrogate is refused as ``canonical_json`` refuses it).
    ``ledger.signing.dsse`` proves an envelope so (tests/ledger/test_dsse_fast_paths.py)."""
    return _c_encoded(value)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_of(value: Any, *, json_read: bool = False) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value`` (``json_read``: see
    ``canonical_json``)."""
    return DIGEST_PREFIX + sha256_hex(canonical_json(value, json_read=json_read))


def digest_hex(digest: str) -> str:
    """The hex part of a ``sha256:<hex>`` digest, checked."""
    if not is_digest(digest):
        raise CanonicalizationError(f"{digest!r} is not a sha256:<64 hex> digest")
    return digest[len(DIGEST_PREFIX) :]


def is_digest(value: object) -> bool:
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def canonical_b64decode(text: object, what: str = "value") -> bytes:
    """The bytes of standard, padded base64 (RFC 4648 §4) in its one canonical spelling.

    Base64 is malleable: the spare bits of the last character are ignored by decoders, so
    ``...F4=`` and ``...F5=`` name the same key. A record that anyone verifies must have one
    spelling, or two different signed texts can mean the same thing (and a byte-level audit
    disagrees with the verifier). Raises :class:`CanonicalizationError` otherwise.
    """
    if not isinstance(text, str):
        raise CanonicalizationError(f"{what} must be a base64 string")
    try:
        encoded = text.encode("ascii")
        # strict_mode refuses what validate=True refuses (characters outside the alphabet,
        # bad padding); binascii directly, as the per-hash cost of a proof adds up.
        raw = binascii.a2b_base64(encoded, strict_mode=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise CanonicalizationError(f"{what} is not valid standard base64") from None
    if binascii.b2a_base64(raw, newline=False) != encoded:
        raise CanonicalizationError(f"{what} is not canonical base64 (stray padding bits)")
    return raw
