"""What every statement model shares: the strict base, the signed predicate, the field types.

Imported with the first statement model (:mod:`domain.statements` loads the models on first
use), so a process that never validates a statement never imports pydantic.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    ValidationError,
    ValidationInfo,
)

from domain.statements import STORED, StatementError
from domain.timestamps import parse_time


def _rfc3339(value: str) -> str:
    parse_time(value)
    return value


# Signed text may not carry characters that change how it displays without being seen:
# Unicode's format characters (bidirectional overrides and isolates, zero-width joiners and
# spaces, tag characters, the soft hyphen...: category Cf), controls other than tab,
# newline and carriage return (Cc), line and paragraph separators (Zl, Zp), surrogates and
# private-use characters. In a label, a note or a link they make text read as something
# other than what it is (a URL that displays as another, "Trojan Source").
_ASCII_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})
_ALLOWED_CONTROLS = frozenset("\t\n\r")


def _visible(value: str) -> str:
    if value.isascii():  # the common case, at regex speed
        found = _ASCII_CONTROL.search(value)
        hidden = found.group() if found is not None else None
    else:
        hidden = next(
            (
                c
                for c in value
                if c not in _ALLOWED_CONTROLS and unicodedata.category(c) in _HIDDEN_CATEGORIES
            ),
            None,
        )
    if hidden is not None:
        raise ValueError(
            f"must not contain the invisible or bidirectional control character U+{ord(hidden):04X}"
        )
    return value


def _https_url(value: str) -> str:
    if not value.startswith("https://") or len(value) <= len("https://"):
        raise ValueError("must be an https:// URL")
    # Printable ASCII only: a link reads as what it is (non-ASCII is percent-encoded).
    if not all("!" <= c <= "~" for c in value):
        raise ValueError("must be printable ASCII without spaces (percent-encode the rest)")
    return value


# Free text a signer writes: bounded, and without hidden or bidirectional controls.
VISIBLE = AfterValidator(_visible)


Timestamp = Annotated[StrictStr, AfterValidator(_rfc3339)]
HttpsUrl = Annotated[StrictStr, Field(max_length=2000), AfterValidator(_https_url)]
Sha256Hex = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
Digest = Annotated[StrictStr, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
KeyId = Digest
Slug = Annotated[StrictStr, Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=100)]


class StrictModel(BaseModel):
    # Strict: a JSON string is never coerced into a number or bool. Enum fields opt out
    # (Field(strict=False)) only so that their JSON string values are accepted.
    # defer_build: a predicate type's validator is built when first used (start-up time).
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class SignedPredicate(StrictModel):
    """Every predicate says when its signer issued it (checked against the key's validity)."""

    issuedAt: Timestamp


def admitting(info: ValidationInfo) -> bool:
    """Whether this validation is of a new predicate (admission, or an agent before it signs),
    where only the vocabulary is accepted; False when reading a stored one."""
    return not (isinstance(info.context, Mapping) and info.context.get(STORED))


def describe(exc: ValidationError, prefix: str) -> str:
    parts = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"])
        msg = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        parts.append(f"{prefix}{loc}: {msg}" if loc else f"{prefix.rstrip('.')}: {msg}")
    return "; ".join(parts)


Predicate = TypeVar("Predicate", bound=SignedPredicate)


def validate_predicate(
    model: type[Predicate], fields: Mapping[str, Any], *, stored: bool
) -> Predicate:
    """``fields`` through ``model``, its errors as one :class:`StatementError`."""
    try:
        return model.model_validate(fields, context={STORED: True} if stored else None)
    except ValidationError as exc:
        raise StatementError(describe(exc, "predicate.")) from None
