"""What every statement model shares: the strict base, the signed predicate, the field types.

The models are msgspec Structs: one pass over the parsed statement checks the types,
lengths and patterns (in C) and makes the objects callers read. What msgspec's constraints
cannot say (a timestamp, text without hidden characters, the rules across fields) runs in
``__post_init__``, once per object, as the object is made.
"""

# No ``from __future__ import annotations``: msgspec reads these Structs' annotations as
# objects, not strings it would compile and evaluate when each is first used (issue 33).

import re
import sys
import unicodedata
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Annotated, Any, ClassVar, TypeVar

import msgspec
from msgspec import Meta

from domain.statements import StatementError
from domain.timestamps import parse_time


def rfc3339(value: str) -> None:
    parse_time(value)


# Signed text may not carry characters that change how it displays without being seen:
# Unicode's format characters (bidirectional overrides and isolates, zero-width joiners and
# spaces, tag characters, the soft hyphen...: category Cf), controls other than tab,
# newline and carriage return (Cc), line and paragraph separators (Zl, Zp), surrogates and
# private-use characters. In a label, a note or a link they make text read as something
# other than what it is (a URL that displays as another, "Trojan Source").
_ASCII_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})
_ALLOWED_CONTROLS = frozenset("\t\n\r")


def visible(value: str) -> None:
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


def https_url(value: str) -> None:
    if not value.startswith("https://") or len(value) <= len("https://"):
        raise ValueError("must be an https:// URL")
    # Printable ASCII only: a link reads as what it is (non-ASCII is percent-encoded).
    if not all("!" <= c <= "~" for c in value):
        raise ValueError("must be printable ASCII without spaces (percent-encode the rest)")


def each(check: Callable[[str], None]) -> Callable[[Any], None]:
    """``check`` on every item of a list, or every value of an object."""

    def checked(values: Any) -> None:
        for value in values.values() if isinstance(values, dict) else values:
            check(value)

    return checked


# Patterns are anchored with ``\Z``: msgspec searches with ``re``, whose ``$`` also matches
# before a final newline (pydantic's regex engine did not; "abc\n" is no slug).
Sha256Hex = Annotated[str, Meta(pattern=r"^[0-9a-f]{64}\Z")]
Digest = Annotated[str, Meta(pattern=r"^sha256:[0-9a-f]{64}\Z")]
KeyId = Digest
Slug = Annotated[str, Meta(pattern=r"^[a-z0-9][a-z0-9-]*\Z", max_length=100)]
HttpsUrl = Annotated[str, Meta(max_length=2000)]  # and https_url, in the model's checks
Uint53 = Annotated[int, Meta(ge=0, le=2**53 - 1)]
# A JSON number is finite: the bounds refuse inf and NaN (NaN compares false with both).
_MAX = sys.float_info.max
Finite = Annotated[float, Meta(ge=-_MAX, le=_MAX)]
NonNegative = Annotated[float, Meta(ge=0, le=_MAX)]


class FieldError(ValueError):
    """A check of one field failed: its name goes into the error's location."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# Whether the predicate being made is read from the log (verify, history) rather than
# offered for admission: rules added since it was admitted (the rerun vocabulary) do not
# apply to it. A context variable, so that threads and tasks each have their own.
_STORED: ContextVar[bool] = ContextVar("stored_predicate", default=False)


def admitting() -> bool:
    """Whether this validation is of a new predicate (admission, or an agent before it signs),
    where only the vocabulary is accepted; False when reading a stored one."""
    return not _STORED.get()


Check = Callable[[Any], None]
Checks = tuple[tuple[str, Check], ...]


class StrictModel(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """Strict: a JSON string is never a number, nor a number a bool; unknown fields are
    refused. Enum fields take their JSON strings (msgspec reads an enum by value).

    ``gc=False`` (inherited): a model is made, frozen, from values that exist before it (JSON
    read, or a caller's fields), and nothing writes into what it holds, so it is never in a
    reference cycle; untracked, the ~5 models of each statement read no longer bring the
    cycle collector's next pass nearer (each pass walks every young container)."""

    # (field, check): what a field's type cannot say, run on the value when it is not None.
    _field_checks: ClassVar[Checks] = ()

    def __post_init__(self) -> None:
        for name, check in self._field_checks:
            value = getattr(self, name)
            if value is not None:
                try:
                    check(value)
                except ValueError as exc:
                    raise FieldError(name, str(exc)) from None
        self.validate()

    def validate(self) -> None:
        """The rules across this object's fields (after its own fields are checked)."""


class SignedPredicate(StrictModel, kw_only=True, frozen=True):
    """Every predicate says when its signer issued it (checked against the key's validity)."""

    issuedAt: str

    _field_checks: ClassVar[Checks] = (("issuedAt", rfc3339),)


Model = TypeVar("Model", bound=StrictModel)

_AT = " - at `"
_UNKNOWN = re.compile(r"Object contains unknown field `(.*)`\Z", re.DOTALL)
_MISSING = re.compile(r"Object missing required field `(.*)`\Z", re.DOTALL)
_NOT_FINITE = re.compile(r"Expected `float` (<= 1\.797|>= -1\.797)")


def describe(exc: msgspec.ValidationError, prefix: str, value: object) -> str:
    """msgspec's error as ``<prefix><dotted.location>: <message>`` (its ``$.cases[0].status``
    read as ``cases.0.status``, the form the HTTP problems and the CLI have always shown);
    ``value``: what was converted."""
    text = str(exc)
    # An unknown field's name is the signer's text, and may spell a location suffix itself
    # ("z` - at `$.subject[0].digest"): msgspec adds none to an error of the object
    # converted, so a name that object holds is the whole name, and the error is there.
    found = _UNKNOWN.match(text)
    if found is not None and isinstance(value, Mapping) and found.group(1) in value:
        loc, message = [found.group(1)], "unknown field"
    else:
        loc, message = _located(exc, text)
    dotted = ".".join(loc)
    return f"{prefix}{dotted}: {message}" if dotted else f"{prefix.rstrip('.')}: {message}"


def _located(exc: msgspec.ValidationError, text: str) -> tuple[list[str], str]:
    """The location msgspec's ``text`` names, and its message in the form shown."""
    message, at, where = text.rpartition(_AT)
    if not at:
        message, where = where, "$`"
    key = where.startswith("key` in `")  # an object's key failed (its value type, a pattern)
    where = where.removeprefix("key` in `").removesuffix("`")
    loc = [p for p in where.removeprefix("$").replace("[", ".").replace("]", "").split(".") if p]
    if key:
        loc.append("[key]")
    cause = exc.__cause__
    if isinstance(cause, FieldError):
        loc.append(cause.field)
    elif (found := _UNKNOWN.match(message)) is not None:
        loc, message = [*loc, found.group(1)], "unknown field"
    elif (found := _MISSING.match(message)) is not None:
        loc, message = [*loc, found.group(1)], "Field required"
    elif _NOT_FINITE.match(message):
        message = "must be a finite number"
    return loc, message


def convert(model: type[Model], fields: object, *, stored: bool = False) -> Model:
    """``fields`` (parsed JSON) made into ``model``, checked in one pass; msgspec's error if
    not. ``stored``: read from the log, so only the rules of admission time apply."""
    token = _STORED.set(stored)  # not a context manager: this runs for every event verified
    try:
        return msgspec.convert(fields, type=model, strict=True)
    finally:
        _STORED.reset(token)


def validate_part(model: type[Model], fields: object) -> Model:
    """``fields`` through ``model`` (a part of a new predicate), its error a StatementError."""
    try:
        return convert(model, fields)
    except msgspec.ValidationError as exc:
        raise StatementError(describe(exc, "", fields)) from None


def validate_predicate(model: type[Model], fields: Mapping[str, Any], *, stored: bool) -> Model:
    """``fields`` through ``model``, its error as one :class:`StatementError`."""
    try:
        return convert(model, fields, stored=stored)
    except msgspec.ValidationError as exc:
        raise StatementError(describe(exc, "predicate.", fields)) from None
