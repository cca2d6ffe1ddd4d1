"""RFC 8785 (JCS) canonical JSON and the sha256 digests computed over it."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any

import rfc8785

from domain.errors import CanonicalizationError

DIGEST_PREFIX = "sha256:"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def canonical_json(value: Any) -> bytes:
    """The JCS bytes of a JSON value.

    Integers beyond ±(2^53−1) are refused (a JavaScript verifier could not read them back
    exactly); callers carry such values as strings.
    """
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
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise CanonicalizationError(f"{what} is not valid standard base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise CanonicalizationError(f"{what} is not canonical base64 (stray padding bits)")
    return raw
