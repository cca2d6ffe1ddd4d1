"""The manifest gate (msgspec Structs) held against the normative JSON Schemas as an ECMA-262
validator reads them, not as the pydantic oracle or Python's ``jsonschema`` (whose patterns
are Python ``re``) do: the other agreement tests draw their patterns from ``ecma()`` itself
or share ``ECMA_WHITESPACE`` with the product, so a wrong translation would pass them all.

The reference is ``jsonschema_rs`` (Rust; installed with schemathesis), whose patterns follow
ECMA-262: on every code point at the start, middle and end of a valid value of each schema
pattern it gives Node's ``RegExp`` verdict, with and without the ``u`` flag (checked once by
hand, 2026-12-06). Documents are driven through the strict JSON reader first, so only what a
JSON text can make is compared; what only Python can build is at the end, as findings.
"""

from __future__ import annotations

import decimal
import json
import math
import types
import unicodedata
from typing import Any

import jsonschema_rs  # a dev dependency (pyproject): never skipped
import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from domain.documents import parse_json
from domain.errors import ManifestError, ParseError
from domain.manifests.models import common
from domain.manifests.registry import validate_manifest
from tests.domain import pydantic_manifest_oracle as oracle
from tests.domain.test_manifest_models import PATTERN_PROBES, schemas
from tests.domain.test_manifest_struct_attacks import SEED, run
from tests.domain.test_manifest_structs import mutated, valid

SEED_TIMING: dict[str, Json] = SEED["run"]["spec"]["timing"]

Json = Any

# Each schema pattern → the model type that carries it (a string goes to Duration's str member).
PATTERN_TYPES: dict[str, Any] = {
    common.IDENTIFIER_PATTERN: common.Identifier,
    common.OBJECT_NAME_PATTERN: common.ObjectName,
    common.SLUG_PATTERN: common.Slug,
    common.SHA256_DIGEST_PATTERN: common.Sha256Digest,
    common.GIT_COMMIT_PATTERN: common.GitCommit,
    common.DURATION_PATTERN: common.Duration,
    common.AXIS_EXPRESSION_PATTERN: common.AxisExpression,
    common.TIMESTAMP_PATTERN: common.Timestamp,
}

# Every code point of the BMP but the surrogates (no JSON text holds one), and every 97th
# beyond it: the ones a pattern's ``\d``, ``\s``, ``.``, ``$`` or a class could be wrong about.
_CHARACTERS = [
    *(chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF),
    *(chr(c) for c in range(0x10000, 0x110000, 97)),
]
# Inside a value (half the cost): the first scripts, and every digit, space, separator or
# control character of the rest, what ``\d``, ``\s`` and case could be read as.
_INSIDE = [
    ch
    for ch in _CHARACTERS
    if ch < "\u3100"
    or unicodedata.category(ch)[0] in "NZ"
    or unicodedata.category(ch) in ("Cc", "Cf")
]


def _gate_accepts(value: str, annotation: Any) -> bool:
    try:
        msgspec.convert(value, annotation, strict=True)
    except msgspec.ValidationError:
        return False
    return True


def test_every_schema_pattern_has_its_model_type() -> None:
    assert set(PATTERN_TYPES) == set(PATTERN_PROBES)


@pytest.mark.parametrize("pattern", sorted(PATTERN_TYPES))
def test_a_pattern_agrees_with_ecma_262_on_every_character(pattern: str) -> None:
    """Each code point inserted at the start, in the middle and at the end of a valid value,
    and in place of its middle character; plus the line ends ECMA's ``$`` does not skip."""
    annotation = PATTERN_TYPES[pattern]
    reference = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
    base = next(p for p in PATTERN_PROBES[pattern] if reference.is_valid(p))
    middle = len(base) // 2
    candidates = {base + "\n", base + "\r\n", base + "\u2028", "\n" + base}
    for ch in _CHARACTERS:
        candidates.update((ch + base, base + ch))
    for ch in _INSIDE:
        candidates.update(
            (base[:middle] + ch + base[middle:], base[:middle] + ch + base[middle + 1 :])
        )
    differ = [
        ascii(value)
        for value in sorted(candidates)
        if _gate_accepts(value, annotation) is not reference.is_valid(value)
    ]
    assert not differ, differ[:10]


# --- manifests from JSON text -------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    # In Draft 2020-12 ``format`` is an annotation; the schemas' patterns carry the rules.
    return {
        kind: jsonschema_rs.validator_for(schema, validate_formats=False)
        for kind, schema in schemas().items()
    }


def _from_json_text(doc: Json) -> Json | None:
    """``doc`` as the ledger's strict reader gives it back from JSON text, or None where no
    JSON text spells it (NaN, a lone surrogate, an integer no float holds...)."""
    try:
        text = json.dumps(doc, allow_nan=False, ensure_ascii=False).encode("utf-8")
        return parse_json(text)
    except (ValueError, TypeError, ParseError):
        return None


def _verdicts(reference: dict[str, Any], doc: Json) -> tuple[list[str], str | None]:
    """(where the reference finds errors, the gate's refusal or None)."""
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if isinstance(kind, str) and kind in reference:
        errors = [
            ".".join(map(str, e.instance_path)) or "(root)"
            for e in reference[kind].iter_errors(doc)
        ]
    else:
        errors = ["(root)"]
    try:
        validate_manifest(doc)
    except ManifestError as refused:
        return errors, refused.message
    return errors, None


def _assert_agree(reference: dict[str, Any], doc: Json) -> bool:
    """The gate and the reference agree on ``doc`` (and where it is wrong); its verdict."""
    errors, refusal = _verdicts(reference, doc)
    assert (refusal is None) is (not errors), (refusal, errors[:3])
    if refusal is not None and refusal.count(": ") >= 2:
        # The location named is one the reference finds wrong, or (an unknown or missing
        # field, a property name) a property of an object it finds wrong.
        where = refusal.split(": ", 2)[1]
        parent = where.rpartition(".")[0] or "(root)"
        assert where in errors or parent in errors, (refusal, errors[:3])
    return not errors


_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


@_SETTINGS
@given(kind=st.sampled_from(sorted(schemas())), data=st.data())
def test_valid_manifests_from_json_text_are_accepted_by_both(
    reference: dict[str, Any], kind: str, data: st.DataObject
) -> None:
    doc = _from_json_text(data.draw(valid(kind), label="manifest"))
    if doc is not None:
        event("accepted" if _assert_agree(reference, doc) else "refused")


@_SETTINGS
@given(doc=mutated())
def test_mutated_manifests_from_json_text_get_the_ecma_verdict_and_location(
    reference: dict[str, Any], doc: Json
) -> None:
    parsed = _from_json_text(doc)
    if parsed is not None:
        event("accepted" if _assert_agree(reference, parsed) else "refused")


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("spec.timing.samples", 4503599627370497.0),  # 2**52 + 1, integral: an integer
        ("spec.timing.samples", 9007199254740990.0),
        ("spec.timing.samples", 4503599627370495.5),
        ("spec.timing.samples", 2251799813685248.5),
        ("spec.timing.samples", 5e-324),  # > 0 but no integer
        ("spec.timing.samples", -0.0),
        ("spec.correctness.matchedRatio", 1.0000000000000002),
        ("spec.correctness.matchedRatio", -0.0),
        ("spec.correctness.maximumAbsoluteError", -5e-324),
        ("spec.sourceNative.metrics.x", 1.7976931348623157e308),
        ("spec.sourceNative.metrics.x", 1e20),  # read as a float by the strict reader
        ("spec.timing.latencyNs.mean", "1\u3000ms"),  # U+3000 is ECMA white space
        ("spec.timing.latencyNs.mean", "1\u180ems"),  # U+180E no longer is
        ("spec.timing.latencyNs.mean", "1\u2028ms"),
        ("spec.timing.latencyNs.mean", "1\ufeffms"),
        ("spec.timing.latencyNs.mean", "01 ms"),
        ("metadata.title", "e\u0301" * 100),  # 200 code points, 100 graphemes
        ("metadata.title", "e\u0301" * 100 + "e"),
        ("metadata.title", "\U0001f600" * 200),  # 400 UTF-16 units, 200 code points
        ("metadata.title", "\U0001f600" * 201),
    ],
)
def test_edges_from_json_text(reference: dict[str, Any], where: str, value: Json) -> None:
    doc = _from_json_text(run(**{where: value}))
    assert doc is not None
    _assert_agree(reference, doc)


# --- values only Python can build (once findings LOW-1..5) ----------------------------------------
# No JSON or YAML text the readers accept makes these, but ``validate_manifest`` takes any
# object and promises the schema's verdict, which speaks of JSON text: the gate checks the
# document's JSON text and refuses, naming the place, whatever no JSON text spells.


@pytest.mark.parametrize(
    "where",
    ["spec.timing.samples", "spec.timing.latencyNs.mean", "spec.sourceNative.metrics.x"],
)
def test_a_decimal_is_no_json_number(where: str) -> None:
    doc = run(**{where: decimal.Decimal("3")})
    assert not oracle.accepts(doc)
    with pytest.raises(
        ManifestError, match=f"^BenchmarkRun: {where}: must be a JSON value, not a Decimal$"
    ):
        validate_manifest(doc)


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("spec.timing.latencyNs.confidence95", (1, 2)),
        ("spec.timing.latencyNs.confidence95", {1, 2}),
        ("metadata.authors", ({"name": "x"},)),
        ("metadata.authors", frozenset()),
    ],
)
def test_a_tuple_or_set_is_no_json_array(where: str, value: Json) -> None:
    with pytest.raises(
        ManifestError, match=f"^BenchmarkRun: {where}: must be a JSON value, not a "
    ):
        validate_manifest(run(**{where: value}))


@pytest.mark.parametrize("item", [object(), b"x", decimal.Decimal("1"), {1}, 1j])
def test_a_value_no_json_spells_is_refused_where_the_schema_allows_anything(item: Json) -> None:
    where = "spec.timing.latencyNs.confidence95.2"
    with pytest.raises(
        ManifestError, match=f"^BenchmarkRun: {where}: must be a JSON value, not a "
    ):
        validate_manifest(run(**{"spec.timing.latencyNs.confidence95": [1, 2, item]}))


def test_a_mapping_with_the_python_field_names_is_refused() -> None:
    timing = SEED_TIMING
    snake = {"primary_statistic": timing["primaryStatistic"], "latency_ns": timing["latencyNs"]}
    with pytest.raises(ManifestError):
        validate_manifest(run(**{"spec.timing": snake}))  # a dict: refused, and held
    with pytest.raises(
        ManifestError,
        match=r"^BenchmarkRun: spec\.timing: must be a JSON value, not a mappingproxy$",
    ):
        validate_manifest(run(**{"spec.timing": types.MappingProxyType(snake)}))


def test_a_signalling_nan_is_a_refusal_not_a_crash() -> None:
    with pytest.raises(ManifestError, match=r"metrics.x: must be a JSON value, not a Decimal$"):
        validate_manifest(run(**{"spec.sourceNative.metrics.x": decimal.Decimal("sNaN")}))


@pytest.mark.parametrize("number", [math.inf, -math.inf, math.nan])
def test_a_number_json_has_no_spelling_for_is_refused(number: float) -> None:
    with pytest.raises(ManifestError, match=r"metrics.x: must be a finite number"):
        validate_manifest(run(**{"spec.sourceNative.metrics.x": number}))


def test_a_key_that_is_no_string_is_refused() -> None:
    with pytest.raises(ManifestError, match=r"metrics.1: keys must be strings$"):
        validate_manifest(run(**{"spec.sourceNative.metrics": {1: 2.0}}))
