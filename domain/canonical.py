"""RFC 8785 (JCS) canonical JSON and the sha256 digests computed over it."""

from __future__ import annotations

import binascii
import hashlib
import json
import re
from typing import Any

import rfc8785

from domain.errors import CanonicalizationError

DIGEST_PREFIX = "sha256:"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


_SAFE_INTEGER = 2**53 - 1


def _plain(value: Any) -> bool:
    """Whether ``value`` is made only of objects with ASCII keys, arrays, strings, booleans,
    null and integers within ±(2^53−1) (exact types: no subclasses, no floats). A loop, not
    recursion: it stops at the first float, and depth cannot exhaust the stack."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if not -_SAFE_INTEGER <= item <= _SAFE_INTEGER:
                return False
        elif kind is dict:
            for key in item:
                if type(key) is not str or not key.isascii():
                    return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        else:
            return False
    return True


def canonical_json(value: Any) -> bytes:
    r"""The JCS bytes of a JSON value.

    Integers beyond ±(2^53−1) are refused (a JavaScript verifier could not read them back
    exactly); callers carry such values as strings.

    Values without floats or non-ASCII keys (envelopes, log entries, most statements) have
    one serialisation that JCS and ``json.dumps(sort_keys=True)`` agree on: the same string
    escapes (``\b \t \n \f \r``, other controls as lowercase ``\u00xx``, nothing else), the
    same integers, and ASCII keys sort alike by code point and by UTF-16 unit. Those are
    written by the C encoder, several times faster; everything else (floats, whose ES6
    spelling JCS requires, and non-ASCII keys) goes to ``rfc8785``. The two agree on every
    value the fast path takes (tests/domain/test_canonical_fast_path.py).
    """
    if _plain(value):
        try:
            return json.dumps(
                value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
            ).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: UTF-8 has no bytes for it
            raise CanonicalizationError(
                "value has no canonical JSON form: a string holds a lone surrogate"
            ) from None
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


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    return DIGEST_PREFIX + sha256_hex(canonical_json(value))


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
