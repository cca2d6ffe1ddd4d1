"""Pieces shared by every ``kernelindex.dev/v1alpha1`` manifest model.

The KernelIndex JSON Schemas (``kernelindex-schemas/*.v1alpha1.schema.json``, Apache-2.0,
KernelIndex) are generated and inline every shared structure; here each is defined once.

The models are a *gate*: they accept exactly what the normative schema accepts and are never
dumped for hashing. To keep JSON Schema semantics:

* every model forbids unknown fields and validates strictly (no ``"5"`` → ``5``, no ``1`` →
  ``True``); an optional field may be absent but never ``null``;
* ``integer`` accepts ints and integral floats (``3.0``), never bools or strings; ``number``
  accepts ints and finite floats, never bools or strings;
* patterns are ECMA-262 regular expressions: ``\\d`` is ASCII only and ``$`` matches only at
  the very end. pydantic compiles patterns with the Rust ``regex`` crate, whose ``$`` already
  behaves so but whose ``\\d`` is Unicode, so ``\\d`` is spelled ``[0-9]`` here;
* ``anyOf`` members and ``prefixItems`` are validated by small functions below so that a
  failure is reported once, at the exact location, in plain words.
"""

import math
import re
from typing import Annotated, Any, Final, Literal, TypeGuard

from annotated_types import Ge, Gt, Le
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainValidator,
    StringConstraints,
    ValidationError,
    field_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from domain.manifests.kinds import ECMA_WHITESPACE

ApiVersion = Literal["kernelindex.dev/v1alpha1"]

MAX_SAFE_INTEGER: Final = 9007199254740991  # 2**53 - 1, the schemas' integer bound


def ascii_digits(pattern: str) -> str:
    """Spell the ECMA-262 ``\\d`` (ASCII digits) so that the Rust regex engine agrees."""
    return pattern.replace("\\d", "[0-9]")


# --- patterns, verbatim from the schemas -------------------------------------------------------

IDENTIFIER_PATTERN: Final = r"^[a-z][a-z0-9_]*$"
OBJECT_NAME_PATTERN: Final = r"^[a-z0-9][a-z0-9._-]*$"
SLUG_PATTERN: Final = r"^[a-z0-9][a-z0-9-]*$"
SHA256_DIGEST_PATTERN: Final = r"^sha256:[0-9a-f]{64}$"
GIT_COMMIT_PATTERN: Final = r"^[0-9a-f]{40}$"
DURATION_PATTERN: Final = r"^\d+(\.\d+)?\s?(ns|us|µs|ms|s)$"
SCHEMA_TIMESTAMP_PATTERN: Final = (
    r"^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29"
    r"|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)"
    r"|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:Z))$"
)
TIMESTAMP_PATTERN: Final = ascii_digits(SCHEMA_TIMESTAMP_PATTERN)

# DURATION_PATTERN for Python's ``re`` (used with ``fullmatch``, so no anchors are needed).
_DURATION_TEXT: Final = re.compile(
    ascii_digits(r"\d+(?:\.\d+)?") + ECMA_WHITESPACE + "?(?:ns|us|\u00b5s|ms|s)"
)
_IDENTIFIER_TEXT: Final = re.compile(r"[a-z][a-z0-9_]*")

# Friendlier words for patterns too long to quote in an error message.
PATTERN_DESCRIPTIONS: Final = {
    TIMESTAMP_PATTERN: "must be a UTC date-time like 2026-08-22T11:05:31.586Z",
}


# --- base model --------------------------------------------------------------------------------


class StrictModel(BaseModel):
    """An object with ``additionalProperties: false``: camelCase JSON names, strict types."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        regex_engine="rust-regex",
        # Each model's validator is built when it first validates: a command that checks a
        # run's manifests never pays for the serving kinds (kernelindex show starts faster).
        defer_build=True,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _reject_null(cls, value: object) -> object:
        # The schemas never allow null; an optional field is either absent or a real value.
        if value is None:
            raise PydanticCustomError("null_value", "must not be null")
        return value


# --- scalars -----------------------------------------------------------------------------------


def _is_json_integer(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


def _json_integer(value: object) -> object:
    """JSON Schema ``integer``: an int or an integral float, never a bool or a string."""
    if not _is_json_integer(value):
        raise PydanticCustomError("json_integer", "must be an integer")
    return int(value)


def _is_json_number(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _json_number(value: object) -> int | float:
    """JSON Schema ``number``: an int or a finite float, never a bool or a string."""
    if not _is_json_number(value):
        raise PydanticCustomError("json_number", "must be a number")
    return value


_Integer = Annotated[int, BeforeValidator(_json_integer)]
SafeInteger = Annotated[_Integer, Ge(-MAX_SAFE_INTEGER), Le(MAX_SAFE_INTEGER)]
NonNegativeInteger = Annotated[_Integer, Ge(0), Le(MAX_SAFE_INTEGER)]
PositiveInteger = Annotated[_Integer, Gt(0), Le(MAX_SAFE_INTEGER)]

Number = Annotated[float, PlainValidator(_json_number)]
NonNegativeNumber = Annotated[Number, Ge(0)]
PositiveNumber = Annotated[Number, Gt(0)]
Fraction = Annotated[Number, Ge(0), Le(1)]

Text50 = Annotated[str, StringConstraints(max_length=50)]
Text100 = Annotated[str, StringConstraints(max_length=100)]
Text120 = Annotated[str, StringConstraints(max_length=120)]
Text200 = Annotated[str, StringConstraints(max_length=200)]
Text500 = Annotated[str, StringConstraints(max_length=500)]
Text1000 = Annotated[str, StringConstraints(max_length=1000)]
Text2000 = Annotated[str, StringConstraints(max_length=2000)]

Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
"""Lower snake case: enum-like open vocabularies (dtype, timer, vendor...) and map keys."""
ObjectName = Annotated[str, StringConstraints(max_length=200, pattern=OBJECT_NAME_PATTERN)]
Slug = Annotated[str, StringConstraints(max_length=100, pattern=SLUG_PATTERN)]
Sha256Digest = Annotated[str, StringConstraints(pattern=SHA256_DIGEST_PATTERN)]
GitCommit = Annotated[str, StringConstraints(pattern=GIT_COMMIT_PATTERN)]
Timestamp = Annotated[str, StringConstraints(pattern=TIMESTAMP_PATTERN)]
"""The schemas' ``format: date-time`` is an annotation only in Draft 2020-12; the pattern rules."""

AxisValues = dict[Identifier, SafeInteger]


# --- anyOf members -----------------------------------------------------------------------------


def _duration(value: object) -> int | str:
    """``anyOf``: integer nanoseconds in [0, 2**53-1], or text matching DURATION_PATTERN."""
    if isinstance(value, str) and _DURATION_TEXT.fullmatch(value):
        return value
    if _is_json_integer(value) and 0 <= value <= MAX_SAFE_INTEGER:
        return int(value)
    raise PydanticCustomError(
        "duration",
        "must be whole nanoseconds (0 to {maximum}) or a string matching {pattern}",
        {"maximum": MAX_SAFE_INTEGER, "pattern": DURATION_PATTERN},
    )


def _dimension(value: object) -> int | str:
    """``anyOf``: a tensor extent in [0, 2**53-1], or the name of an axis."""
    if isinstance(value, str) and _IDENTIFIER_TEXT.fullmatch(value):
        return value
    if _is_json_integer(value) and 0 <= value <= MAX_SAFE_INTEGER:
        return int(value)
    raise PydanticCustomError(
        "dimension",
        "must be an integer from 0 to {maximum} or an axis name matching {pattern}",
        {"maximum": MAX_SAFE_INTEGER, "pattern": IDENTIFIER_PATTERN},
    )


def _number_or_text500(value: object) -> float | str:
    """``anyOf``: a number, or a string of at most 500 characters."""
    if (isinstance(value, str) and len(value) <= 500) or _is_json_number(value):
        return value
    raise PydanticCustomError(
        "number_or_text", "must be a number or a string of at most 500 characters"
    )


Duration = Annotated[int | str, PlainValidator(_duration)]
"""A duration as authored; canonicalisation turns text like ``"0.008 ms"`` into ``8000``."""
Dimension = Annotated[int | str, PlainValidator(_dimension)]
NumberOrText500 = Annotated[float | str, PlainValidator(_number_or_text500)]


# --- prefixItems -------------------------------------------------------------------------------


def _duration_prefix(items: list[Any]) -> list[Any]:
    """``prefixItems: [Duration, Duration]`` with no ``items``/``minItems``/``maxItems``.

    So the array may be shorter than two, and any items after the second are unconstrained.
    """
    errors: list[InitErrorDetails] = []
    for index, item in enumerate(items[:2]):
        try:
            _duration(item)
        except PydanticCustomError as error:
            errors.append({"type": error, "loc": (index,), "input": item})
    if errors:
        raise ValidationError.from_exception_data("prefixItems", errors)
    return items


DurationPrefixPair = Annotated[list[Any], AfterValidator(_duration_prefix)]


# --- shared objects ----------------------------------------------------------------------------


class Author(StrictModel):
    name: Text200 | None = None
    github: Text100 | None = None


class SourceRef(StrictModel):
    url: Text2000


class Metadata(StrictModel):
    """``metadata``: identical in every kind and never part of a digest."""

    name: ObjectName
    title: Text200 | None = None
    description: Text2000 | None = None
    labels: dict[Identifier, Text200] | None = None
    authors: list[Author] | None = None
    source_refs: list[SourceRef] | None = None


class ArtifactRef(StrictModel):
    """A content-addressed blob: logs, raw samples, tensor data, reference code."""

    uri: Text2000
    digest: Sha256Digest


class Measurement(StrictModel):
    """One reported statistic (BenchmarkRun and ServingRun ``measurements`` items)."""

    metric: Identifier
    unit: Identifier
    statistic: Identifier
    value: Number
    sample_count: PositiveInteger | None = None


class Manifest(StrictModel):
    """``{apiVersion, kind, metadata, spec}``; each kind narrows ``kind`` and adds ``spec``."""

    api_version: ApiVersion
    kind: str
    metadata: Metadata
