"""Pieces shared by every ``kernelindex.dev/v1alpha1`` manifest model.

The KernelIndex JSON Schemas (``kernelindex-schemas/*.v1alpha1.schema.json``, Apache-2.0,
KernelIndex) are generated and inline every shared structure; here each is defined once.

The models are msgspec Structs and a *gate*: they accept exactly what the normative schema
accepts and are never dumped for hashing. One ``msgspec.convert(document, Kind, strict=True)``
checks a parsed manifest (in C). To keep JSON Schema semantics:

* every model forbids unknown fields and validates strictly (no ``"5"`` → ``5``, no ``1`` →
  ``True``); an optional field may be absent (``UNSET``) but never ``null``;
* ``integer`` accepts ints and integral floats (``3.0``), never bools or strings; ``number``
  accepts ints and finite floats, never bools or strings;
* patterns are ECMA-262 regular expressions: ``\\d`` is ASCII only and ``$`` matches only at
  the very end. msgspec searches with Python's ``re``, whose ``\\d`` is Unicode and whose
  ``$`` also matches before a final newline, so ``\\d`` is spelled ``[0-9]``, ``$`` is ``\\Z``
  and ``\\s`` is ECMA's list of white space;
* lengths count code points, as JSON Schema does (and Python's ``len``);
* ``anyOf`` members are unions of constrained types; the one ``prefixItems`` (a pair of
  durations) is checked in ``__post_init__`` (see ``DurationPrefixPair``).
"""

# No ``from __future__ import annotations``: msgspec reads these Structs' annotations as
# objects, not strings it would compile and evaluate when each is first used (issue 33).

import sys
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from domain.manifests.kinds import ECMA_WHITESPACE

__all__ = ["UNSET", "UnsetType"]

ApiVersion = Literal["kernelindex.dev/v1alpha1"]

MAX_SAFE_INTEGER: Final = 9007199254740991  # 2**53 - 1, the schemas' integer bound


def ecma(pattern: str) -> str:
    """A schema pattern (ECMA-262) spelled for Python's ``re.search`` with the same meaning."""
    assert pattern.endswith("$") and not pattern.endswith("\\$"), pattern
    return pattern.replace("\\d", "[0-9]").replace("\\s", ECMA_WHITESPACE).removesuffix("$") + "\\Z"


# --- patterns, verbatim from the schemas -------------------------------------------------------

IDENTIFIER_PATTERN: Final = r"^[a-z][a-z0-9_]*$"
OBJECT_NAME_PATTERN: Final = r"^[a-z0-9][a-z0-9._-]*$"
SLUG_PATTERN: Final = r"^[a-z0-9][a-z0-9-]*$"
SHA256_DIGEST_PATTERN: Final = r"^sha256:[0-9a-f]{64}$"
GIT_COMMIT_PATTERN: Final = r"^[0-9a-f]{40}$"
DURATION_PATTERN: Final = r"^\d+(\.\d+)?\s?(ns|us|µs|ms|s)$"
AXIS_EXPRESSION_PATTERN: Final = r"^[a-z0-9_+\-*%/() ]+$"
TIMESTAMP_PATTERN: Final = (
    r"^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29"
    r"|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)"
    r"|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:Z))$"
)

# How an error names each pattern: the schema's spelling, or friendlier words for one too
# long to quote. Keyed by the Python spelling, which is what msgspec's error shows.
PATTERN_DESCRIPTIONS: Final = {
    ecma(pattern): f"must match pattern {pattern}"
    for pattern in (
        IDENTIFIER_PATTERN,
        OBJECT_NAME_PATTERN,
        SLUG_PATTERN,
        SHA256_DIGEST_PATTERN,
        GIT_COMMIT_PATTERN,
        DURATION_PATTERN,
        AXIS_EXPRESSION_PATTERN,
    )
} | {ecma(TIMESTAMP_PATTERN): "must be a UTC date-time like 2026-08-22T11:05:31.586Z"}


def _pattern(pattern: str, max_length: int | None = None) -> Meta:
    return Meta(pattern=ecma(pattern), max_length=max_length)


# --- base model --------------------------------------------------------------------------------


class FieldError(ValueError):
    """A ``__post_init__`` check of one field failed; ``field`` is its dotted location in the
    object (msgspec places the error at the object)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class StrictModel(
    msgspec.Struct,
    rename="camel",
    forbid_unknown_fields=True,
    frozen=True,
    kw_only=True,  # neither this nor frozen is inherited (for mypy): each model says both
    gc=False,  # no model refers back to another: nothing for the cycle collector to find
):
    """An object with ``additionalProperties: false``: camelCase JSON names, strict types."""


# --- scalars -----------------------------------------------------------------------------------
# An ``integer`` is an int, or a float with no fraction (``multiple_of=1``); a ``number`` an
# int or a finite float. msgspec never reads a bool as either.


_SAFE: Final = MAX_SAFE_INTEGER
_BIG: Final = sys.float_info.max  # a float bounded both ways is finite: refuses inf and NaN

SafeInteger = (
    Annotated[int, Meta(ge=-_SAFE, le=_SAFE)]
    | Annotated[float, Meta(ge=-_SAFE, le=_SAFE, multiple_of=1)]
)
NonNegativeInteger = (
    Annotated[int, Meta(ge=0, le=_SAFE)] | Annotated[float, Meta(ge=0, le=_SAFE, multiple_of=1)]
)
PositiveInteger = (
    Annotated[int, Meta(gt=0, le=_SAFE)] | Annotated[float, Meta(gt=0, le=_SAFE, multiple_of=1)]
)

Number = int | Annotated[float, Meta(ge=-_BIG, le=_BIG)]
NonNegativeNumber = Annotated[int, Meta(ge=0)] | Annotated[float, Meta(ge=0, le=_BIG)]
PositiveNumber = Annotated[int, Meta(gt=0)] | Annotated[float, Meta(gt=0, le=_BIG)]
Fraction = Annotated[int, Meta(ge=0, le=1)] | Annotated[float, Meta(ge=0, le=1)]

Text50 = Annotated[str, Meta(max_length=50)]
Text100 = Annotated[str, Meta(max_length=100)]
Text120 = Annotated[str, Meta(max_length=120)]
Text200 = Annotated[str, Meta(max_length=200)]
Text500 = Annotated[str, Meta(max_length=500)]
Text1000 = Annotated[str, Meta(max_length=1000)]
Text2000 = Annotated[str, Meta(max_length=2000)]

Identifier = Annotated[str, _pattern(IDENTIFIER_PATTERN)]
"""Lower snake case: enum-like open vocabularies (dtype, timer, vendor...) and map keys."""
ObjectName = Annotated[str, _pattern(OBJECT_NAME_PATTERN, 200)]
Slug = Annotated[str, _pattern(SLUG_PATTERN, 100)]
Sha256Digest = Annotated[str, _pattern(SHA256_DIGEST_PATTERN)]
GitCommit = Annotated[str, _pattern(GIT_COMMIT_PATTERN)]
Timestamp = Annotated[str, _pattern(TIMESTAMP_PATTERN)]
"""The schemas' ``format: date-time`` is an annotation only in Draft 2020-12; the pattern rules."""
AxisExpression = Annotated[str, _pattern(AXIS_EXPRESSION_PATTERN, 200)]

AxisValues = dict[Identifier, SafeInteger]


# --- anyOf -------------------------------------------------------------------------------------

Duration = NonNegativeInteger | Annotated[str, _pattern(DURATION_PATTERN)]
"""Integer nanoseconds in [0, 2**53-1], or text like ``"0.008 ms"`` (canonicalisation turns it
into ``8000``)."""
Dimension = NonNegativeInteger | Identifier
"""A tensor extent in [0, 2**53-1], or the name of an axis."""
NumberOrText500 = Number | Text500

# How an error describes a value of an anyOf type that is none of its members.
ANY_OF_DESCRIPTIONS: Final[tuple[tuple[Any, str], ...]] = (
    (
        Duration,
        f"must be whole nanoseconds (0 to {MAX_SAFE_INTEGER}) or a string matching "
        f"{DURATION_PATTERN}",
    ),
    (
        Dimension,
        f"must be an integer from 0 to {MAX_SAFE_INTEGER} or an axis name matching "
        f"{IDENTIFIER_PATTERN}",
    ),
    (NumberOrText500, "must be a number or a string of at most 500 characters"),
)
INTEGERS: Final = (SafeInteger, NonNegativeInteger, PositiveInteger)
NUMBERS: Final = (Number, NonNegativeNumber, PositiveNumber, Fraction)


# --- prefixItems -------------------------------------------------------------------------------

DurationPrefixPair = list[Any]
"""``prefixItems: [Duration, Duration]`` with no ``items``/``minItems``/``maxItems``: the array
may be shorter than two, and any items after the second are unconstrained. A model with such
a field checks it with :func:`check_duration_prefix` in ``__post_init__``."""


def check_duration_prefix(name: str, items: list[Any] | UnsetType) -> None:
    if isinstance(items, UnsetType):
        return
    for index, item in enumerate(items[:2]):
        try:
            msgspec.convert(item, Duration, strict=True)
        except msgspec.ValidationError:
            raise FieldError(f"{name}.{index}", ANY_OF_DESCRIPTIONS[0][1]) from None


# --- shared objects ----------------------------------------------------------------------------


class Author(StrictModel, kw_only=True, frozen=True):
    name: Text200 | UnsetType = UNSET
    github: Text100 | UnsetType = UNSET


class SourceRef(StrictModel, kw_only=True, frozen=True):
    url: Text2000


class Metadata(StrictModel, kw_only=True, frozen=True):
    """``metadata``: identical in every kind and never part of a digest."""

    name: ObjectName
    title: Text200 | UnsetType = UNSET
    description: Text2000 | UnsetType = UNSET
    labels: dict[Identifier, Text200] | UnsetType = UNSET
    authors: list[Author] | UnsetType = UNSET
    source_refs: list[SourceRef] | UnsetType = UNSET


class ArtifactRef(StrictModel, kw_only=True, frozen=True):
    """A content-addressed blob: logs, raw samples, tensor data, reference code."""

    uri: Text2000
    digest: Sha256Digest


class Measurement(StrictModel, kw_only=True, frozen=True):
    """One reported statistic (BenchmarkRun and ServingRun ``measurements`` items)."""

    metric: Identifier
    unit: Identifier
    statistic: Identifier
    value: Number
    sample_count: PositiveInteger | UnsetType = UNSET


class Manifest(StrictModel, kw_only=True, frozen=True):
    """``{apiVersion, kind, metadata, spec}``; each kind narrows ``kind`` and adds ``spec``."""

    api_version: ApiVersion
    kind: str
    metadata: Metadata
