"""The manifest models became msgspec Structs (issues 36 and 33): for any manifest, valid or
mutated (wrong types, null, extra fields, integral floats, bools for numbers, Unicode digits,
a final newline in a patterned string, over-long strings, lone surrogates, integers past
2**53-1...), :func:`validate_manifest` accepts exactly what the pydantic models accepted. The
pydantic models are kept as the oracle in ``tests/domain/pydantic_manifest_oracle.py``.

Valid manifests are generated from the kinds' JSON Schemas (every optional property present
or absent, maps and arrays at their size limits, strings at their length limits); the
mutations change one location. One deliberate difference: the Structs refuse a lone
surrogate anywhere (no JSON text holds one), where pydantic let one through inside the items
of ``confidence95`` that no schema constrains.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from domain.errors import ManifestError
from domain.manifests.models.common import MAX_SAFE_INTEGER, ecma
from domain.manifests.models.schema_errors import first_non_json
from domain.manifests.registry import validate_manifest
from tests.domain import pydantic_manifest_oracle as oracle
from tests.domain.test_manifest_models import (
    catalog_manifests,
    dotted,
    get_at,
    nodes,
    schemas,
    seed_manifests,
    with_value,
    without,
)

Json = Any
Loc = tuple[str | int, ...]


def structs_accept(manifest: Json) -> bool:
    try:
        validate_manifest(manifest)
    except ManifestError:
        return False
    return True


def expected(manifest: Json) -> bool:
    """The oracle's verdict, less the one deliberate difference (see the module docstring)."""
    return oracle.accepts(manifest) and first_non_json(manifest) is None


# --- valid manifests from the schemas ---------------------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8"), max_size=8)


def _string(schema: dict[str, Json]) -> st.SearchStrategy[str]:
    limit = schema.get("maxLength")
    if "pattern" in schema:
        # The pattern spelled for Python with ECMA's meaning; fullmatch, so no final "\n".
        found = st.from_regex(ecma(schema["pattern"]), fullmatch=True)
        return found if limit is None else found.filter(lambda s: len(s) <= limit)
    if limit is None:
        return _TEXT
    return st.one_of(_TEXT.map(lambda s: s[:limit]), st.just("\U0001f600" * limit))


def _integer(schema: dict[str, Json]) -> st.SearchStrategy[int | float]:
    low = schema.get("minimum", schema.get("exclusiveMinimum", -MAX_SAFE_INTEGER - 1) + 1)
    high = schema.get("maximum", MAX_SAFE_INTEGER)
    ints = st.integers(low, high)
    return st.one_of(ints, st.sampled_from([low, high]), ints.map(float))


def _number(schema: dict[str, Json]) -> st.SearchStrategy[int | float]:
    exclusive = "exclusiveMinimum" in schema
    low = schema.get("exclusiveMinimum") if exclusive else schema.get("minimum")
    high = schema.get("maximum")
    floats = st.floats(
        min_value=low,
        max_value=high,
        exclude_min=exclusive,
        allow_nan=False,
        allow_infinity=False,
    )
    int_low = None if low is None else math.floor(low) + 1 if exclusive else math.ceil(low)
    ints = st.integers(min_value=int_low, max_value=None if high is None else math.floor(high))
    return st.one_of(floats, ints)


@functools.cache
def valid(schema_key: str) -> st.SearchStrategy[Json]:
    """A valid manifest of one kind."""
    return _valid(schemas()[schema_key])


def _valid(schema: dict[str, Json]) -> st.SearchStrategy[Json]:
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([_valid(option) for option in schema["anyOf"]])
    kind = schema["type"]
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", []))
        props = schema["properties"]
        return st.fixed_dictionaries(
            {name: _valid(sub) for name, sub in props.items() if name in required},
            optional={name: _valid(sub) for name, sub in props.items() if name not in required},
        )
    if kind == "object":
        return st.dictionaries(
            _string(schema["propertyNames"]), _valid(schema["additionalProperties"]), max_size=3
        )
    if kind == "array":
        if "prefixItems" in schema:
            pair = [_valid(item) for item in schema["prefixItems"]]
            return st.tuples(*pair, st.lists(st.just({"any": 1}), max_size=1)).map(
                lambda t: [*t[:-1], *t[-1]]
            ) | st.just([])
        low = schema.get("minItems", 0)
        return st.lists(
            _valid(schema["items"]),
            min_size=low,
            max_size=max(low, min(3, schema.get("maxItems", 3))),
        )
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return _integer(schema)
    if kind == "number":
        return _number(schema)
    return st.booleans()


# --- mutations ---------------------------------------------------------------------------------

REPLACEMENTS: list[Json] = [
    None, True, False, 0, 1, -1, 3.0, 3.5, -0.0, 1e300, "", "5", "a", "a_b", [], [1], {},
    {"a": 1}, MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 2**64, 10**400,
    float(MAX_SAFE_INTEGER + 1), math.inf, -math.inf, math.nan, "\u0663", "\u0663 ms",
    "3\u0085ms", "3\u00a0ms", "10 ns", "2024-02-29T23:59Z", "sha256:" + "0" * 64, "0" * 40,
    "a\ud800", "\udfff",
]  # fmt: skip


def _variants_of(value: Json) -> list[Json]:
    """Changes near a string the document holds: the ones patterns and lengths decide."""
    if not isinstance(value, str):
        return []
    return [
        value + "\n",
        "\n" + value,
        value + " ",
        value.upper(),
        value + "\ud800",
        value + "a" * 2001,
        value.replace("0", "\u0660").replace("1", "\u0661").replace("2", "\u0662"),
        value + "\U0001f600",
    ]


@st.composite
def mutated(draw: st.DrawFn) -> Json:
    kind = draw(st.sampled_from(sorted(schemas())), label="kind")
    doc = draw(valid(kind), label="valid")
    located = list(nodes(doc, schemas()[kind]))[1:]  # the top is a closed object too
    path, value, sub = draw(st.sampled_from(located), label="location")
    # Most changes replace a value: the other kinds are nearly always refused.
    choices: list[str] = ["replace"] * 3 + ["variant"] * 3 + ["revalue"] * 2
    if type(value) is int:
        choices.append("as float")
    if isinstance(value, dict):
        choices += ["extra field", "extra key"]
    choices.append("delete")
    if isinstance(value, list):
        choices.append("grow")
    how = draw(st.sampled_from(choices), label="how")
    event(how)
    if how == "replace":
        return with_value(doc, path, draw(st.sampled_from(REPLACEMENTS), label="value"))
    if how == "variant":
        options = _variants_of(value) or REPLACEMENTS
        return with_value(doc, path, draw(st.sampled_from(options), label="variant"))
    if how == "revalue":  # another valid value of the location's schema
        return with_value(doc, path, draw(_valid(sub), label="value"))
    if how == "as float":
        return with_value(doc, path, float(value))
    if how == "delete":
        return without(doc, path)
    if how == "grow":
        return with_value(doc, path, [*value, *value, *value, None])
    key = draw(
        st.sampled_from(["extraField", "Bad", "a_b", "a\n", "\u0663", "x\ud800", "N" * 201, 5])
        if how == "extra key"
        else st.sampled_from(["unexpected", "api_version", "Kind", "spec ", 5, None]),
        label="key",
    )
    filler = get_at(doc, path)
    entry = next(iter(filler.values())) if filler else "x"
    return with_value(doc, (*path, key), entry)


settings_for_agreement = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@settings_for_agreement
@given(kind=st.sampled_from(sorted(schemas())), data=st.data())
def test_generated_manifests_are_accepted_by_both(kind: str, data: st.DataObject) -> None:
    doc = data.draw(valid(kind), label="manifest")
    assert oracle.accepts(doc), "the generator made a manifest the oracle refuses"
    assert structs_accept(doc)


@settings_for_agreement
@given(doc=mutated())
def test_structs_agree_with_the_pydantic_oracle_on_mutations(doc: Json) -> None:
    verdict = expected(doc)
    event("accepted" if verdict else "refused")
    assert structs_accept(doc) is verdict


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_structs_agree_on_mutations_of_real_manifests(data: st.DataObject) -> None:
    """The seed and catalog manifests, one location changed."""
    docs = [*seed_manifests().values(), *(doc for _, doc in catalog_manifests()[::97])]
    doc = data.draw(st.sampled_from(docs), label="manifest")
    located = list(nodes(doc, schemas()[doc["kind"]]))
    path, value, _ = data.draw(st.sampled_from(located[1:]), label="location")
    options = [*REPLACEMENTS, *_variants_of(value)]
    changed = with_value(doc, path, data.draw(st.sampled_from(options), label="value"))
    assert structs_accept(changed) is expected(changed), dotted(path)


def test_every_conformance_manifest_gets_the_same_verdict() -> None:
    """The seed and every manifest of the catalog export: both accept each."""
    manifests = [*seed_manifests().values(), *(doc for _, doc in catalog_manifests())]
    differ = [
        doc["metadata"]["name"]
        for doc in manifests
        if not (structs_accept(doc) and oracle.accepts(doc))
    ]
    assert not differ, differ[:10]
    assert len(manifests) == 35458 + 3


def test_a_lone_surrogate_is_refused_where_pydantic_let_it_through() -> None:
    run = seed_manifests()["run"]
    where = ("spec", "timing", "latencyNs", "confidence95")
    doc = with_value(run, where, [1, 2, "\ud800"])
    assert oracle.accepts(doc)  # the unconstrained third item: pydantic never looked
    with pytest.raises(ManifestError) as refused:
        validate_manifest(doc)
    assert refused.value.message == (
        "BenchmarkRun: spec.timing.latencyNs.confidence95.2: must not hold a lone surrogate"
    )
    assert structs_accept(with_value(run, where, [1, 2, "\U0001f600"]))
