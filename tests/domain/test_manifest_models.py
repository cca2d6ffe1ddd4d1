"""The manifest models accept exactly what the normative KernelIndex JSON Schemas accept.

Every check here is differential: the same document goes to ``jsonschema`` (Draft 2020-12, the
schemas in ``conformance/kernelindex-schemas``) and to :func:`validate_manifest`, and the verdicts
must agree. Real documents come from the seed record and the public KernelIndex catalog export.

Known deviations of the Python ``jsonschema`` library from ECMA-262 regular expressions (its
``\\d`` is Unicode, its ``$`` also matches before a final newline, its ``\\s`` is Python's) are
kept out of the differential inputs; the models follow ECMA-262, and
``test_patterns_follow_ecma_262`` pins that down on the model side only.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import time
import types
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from domain.errors import ManifestError
from domain.manifests.models.common import INTEGERS, MAX_SAFE_INTEGER, NUMBERS, ApiVersion
from domain.manifests.registry import API_VERSION, manifest_models, validate_manifest
from tests.paths import CONFORMANCE

Json = Any
Loc = tuple[str | int, ...]


SHARED = CONFORMANCE
SCHEMA_DIR = SHARED / "kernelindex-schemas"
SEED = SHARED / "fixtures" / "seed" / "run-38823.manifest.json"
CATALOG = SHARED / "fixtures" / "kernelindex-catalog" / "catalog-2026-08-16-0022af0b.jsonl.zst"
SHA256_PATTERN = "^sha256:[0-9a-f]{64}$"


# --- fixtures loaded once -----------------------------------------------------------------------


@functools.cache
def schemas() -> dict[str, dict[str, Json]]:
    """Kind name (the schema ``title``) → schema."""
    loaded = {}
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        Draft202012Validator.check_schema(schema)
        loaded[schema["title"]] = schema
    return loaded


@functools.cache
def validators() -> dict[str, Draft202012Validator]:
    # No format checker: in Draft 2020-12 ``format`` is an annotation unless opted in.
    return {kind: Draft202012Validator(schema) for kind, schema in schemas().items()}


def schema_accepts(manifest: Json) -> bool:
    kind = manifest.get("kind") if isinstance(manifest, dict) else None
    if not isinstance(kind, str) or kind not in validators():
        return False
    return validators()[kind].is_valid(manifest)


def model_accepts(manifest: Json) -> bool:
    try:
        validate_manifest(manifest)
    except ManifestError:
        return False
    return True


@functools.cache
def seed_manifests() -> dict[str, dict[str, Json]]:
    seed: dict[str, dict[str, Json]] = json.loads(SEED.read_text(encoding="utf-8"))
    return seed


@functools.cache
def load_catalog() -> tuple[tuple[str, dict[str, Json]], ...] | str:
    """Every manifest in the catalog export as ``(where, manifest)``, or why there are none.

    Rows keep their manifest under ``row["manifest"]``; a ``benchmark_runs`` row keeps three,
    ``{"run", "protocol", "environment"}``.
    """
    if not CATALOG.is_file():
        return f"catalog export is absent: {CATALOG}"
    try:
        import zstandard
    except ImportError:
        return "reading the catalog export needs the zstandard package (a dev dependency)"
    with CATALOG.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as reader:
        lines = reader.read().splitlines()
    found: list[tuple[str, dict[str, Json]]] = []
    for number, line in enumerate(lines, start=1):
        record = json.loads(line)
        manifest = record["row"].get("manifest")
        where = f"line {number} ({record['table']})"
        if record["table"] == "benchmark_runs":
            found.extend((f"{where} {role}", doc) for role, doc in manifest.items())
        elif manifest is not None:
            found.append((where, manifest))
    return tuple(found)


def catalog_manifests() -> tuple[tuple[str, dict[str, Json]], ...]:
    catalog = load_catalog()
    if isinstance(catalog, str):
        pytest.skip(catalog)
    return catalog


def shape(doc: dict[str, Json]) -> int:
    """How many distinct schema locations a manifest fills (array indices ignored)."""
    located = nodes(doc, schemas()[doc["kind"]])
    return len({tuple(part for part in path if isinstance(part, str)) for path, _, _ in located})


@functools.cache
def mutation_samples() -> tuple[dict[str, Json], ...]:
    """Valid manifests to mutate: the seed; per kind a synthetic one with every field present
    (see ``full_instance``), and the richest and a spread of others from the catalog."""
    catalog = load_catalog()
    by_kind: dict[str, list[dict[str, Json]]] = {}
    for _, manifest in () if isinstance(catalog, str) else catalog:
        by_kind.setdefault(manifest["kind"], []).append(manifest)
    picked: list[dict[str, Json]] = list(seed_manifests().values())
    picked += [full_instance(schemas()[kind]) for kind in sorted(schemas())]
    for kind in sorted(by_kind):
        docs = by_kind[kind]
        richest = sorted(docs, key=shape, reverse=True)[:3]
        spread = docs[:: max(1, len(docs) // 4)][:4]
        picked.extend(richest + [d for d in spread if d not in richest])
    return tuple(picked)


# --- walking a document beside its schema --------------------------------------------------------


def nodes(
    value: Json, schema: dict[str, Json], path: Loc = ()
) -> Iterator[tuple[Loc, Json, dict[str, Json]]]:
    """Every value in the document with the subschema that governs it."""
    yield path, value, schema
    if isinstance(value, dict) and schema.get("type") == "object":
        properties = schema.get("properties")
        for key, item in value.items():
            sub = (
                properties.get(key)
                if properties is not None
                else schema.get("additionalProperties")
            )
            if isinstance(sub, dict):
                yield from nodes(item, sub, (*path, key))
    elif isinstance(value, list) and schema.get("type") == "array":
        prefix = schema.get("prefixItems", [])
        for index, item in enumerate(value):
            sub = prefix[index] if index < len(prefix) else schema.get("items")
            if isinstance(sub, dict):
                yield from nodes(item, sub, (*path, index))


def is_closed_object(schema: dict[str, Json]) -> bool:
    return schema.get("type") == "object" and "properties" in schema


def leaf_types(schema: dict[str, Json]) -> set[str]:
    return {schema["type"]} if "type" in schema else {s["type"] for s in schema.get("anyOf", [])}


def dotted(path: Loc) -> str:
    return ".".join(str(part) for part in path)


def get_at(doc: Json, path: Loc) -> Json:
    for part in path:
        doc = doc[part]
    return doc


def with_value(doc: Json, path: Loc, value: Json) -> Json:
    changed = copy.deepcopy(doc)
    get_at(changed, path[:-1])[path[-1]] = value
    return changed


def without(doc: Json, path: Loc) -> Json:
    changed = copy.deepcopy(doc)
    del get_at(changed, path[:-1])[path[-1]]
    return changed


def assert_both_reject(doc: Json, where: Loc) -> None:
    """jsonschema and the model both reject, and the ManifestError names the location."""
    kind = doc.get("kind", "manifest") if where != ("kind",) else "manifest"
    assert not schema_accepts(doc), f"jsonschema accepted a mutation at {dotted(where)}"
    with pytest.raises(ManifestError) as caught:
        validate_manifest(doc)
    message = caught.value.message
    assert message.startswith(f"{kind}: "), message
    assert re.search(rf"(?:^{re.escape(kind)}: |; ){re.escape(dotted(where))}: ", message), (
        f"{dotted(where)!r} not named in: {message}"
    )


# --- the registry and the model structure --------------------------------------------------------


def test_registry_covers_exactly_the_schema_kinds() -> None:
    assert set(manifest_models()) == set(schemas())
    assert len(manifest_models()) == 13
    assert (
        get_args(ApiVersion)
        == (API_VERSION,)
        == (schemas()["BenchmarkRun"]["properties"]["apiVersion"]["const"],)
    )
    for kind, model in manifest_models().items():
        fields = {field.name: field for field in msgspec.structs.fields(model)}
        assert get_args(fields["kind"].type) == (kind,)


def _members(annotation: Any) -> list[Any]:
    """A union's members less ``UnsetType`` (an optional field's absence), or the type."""
    if get_origin(annotation) in (Union, types.UnionType):
        return [arg for arg in get_args(annotation) if arg is not msgspec.UnsetType]
    return [annotation]


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated[...]`` and ``X | UnsetType`` down to the structural type."""
    while True:
        members = _members(annotation)
        if len(members) == 1 and members[0] is not annotation:
            annotation = members[0]
        elif get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
        else:
            return annotation


def _is_one_of(annotation: Any, aliases: tuple[Any, ...]) -> bool:
    return any(_members(annotation) == _members(alias) for alias in aliases)


_PYTHON_TYPE = {"string": str, "boolean": bool}


def _check_structure(schema: dict[str, Json], annotation: Any, where: str) -> None:
    structural = _unwrap(annotation)
    if schema.get("type") == "integer":  # an int or an integral float, in bounds
        assert _is_one_of(annotation, INTEGERS), where
        return
    if schema.get("type") == "number":
        assert _is_one_of(annotation, NUMBERS), where
        return
    if "anyOf" in schema:
        assert get_origin(structural) in (Union, types.UnionType), where
        return
    if "const" in schema or "enum" in schema:
        assert get_origin(structural) is Literal, where
        expected = [schema["const"]] if "const" in schema else schema["enum"]
        assert list(get_args(structural)) == expected, where
        return
    kind = schema["type"]
    if kind == "object" and "properties" in schema:
        assert isinstance(structural, type) and issubclass(structural, msgspec.Struct), where
        assert schema.get("additionalProperties") is False, where
        assert structural.__struct_config__.forbid_unknown_fields, where
        fields = {field.encode_name: field for field in msgspec.structs.fields(structural)}
        assert list(fields) == list(schema["properties"]), f"{where}: fields differ from the schema"
        required = {name for name, field in fields.items() if field.required}
        assert required == set(schema.get("required", [])), f"{where}: required fields differ"
        for name, sub in schema["properties"].items():
            _check_structure(sub, fields[name].type, f"{where}.{name}")
    elif kind == "object":
        assert get_origin(structural) is dict, where
        _check_structure(schema["additionalProperties"], get_args(structural)[1], f"{where}.*")
    elif kind == "array":
        assert get_origin(structural) is list, where
        if "items" in schema:
            _check_structure(schema["items"], get_args(structural)[0], f"{where}[]")
    else:
        assert structural is _PYTHON_TYPE[kind], where


@pytest.mark.parametrize("kind", sorted(manifest_models()))
def test_model_structure_mirrors_schema(kind: str) -> None:
    """Same property names in the same order, same required sets, same maps, lists, enums."""
    _check_structure(schemas()[kind], manifest_models()[kind], kind)


# --- real documents ---------------------------------------------------------------------------


def test_seed_manifests_validate_without_being_changed() -> None:
    expected = {
        "run": "BenchmarkRun",
        "protocol": "BenchmarkProtocol",
        "environment": "ExecutionEnvironment",
    }
    for role, manifest in seed_manifests().items():
        before = copy.deepcopy(manifest)
        model = validate_manifest(manifest)
        assert manifest == before
        assert type(model).__name__ == expected[role]
        assert schema_accepts(manifest)
        # The gate invents nothing: whatever was absent stays absent.
        assert msgspec.to_builtins(model) == manifest


def _sweep(manifests: tuple[tuple[str, dict[str, Json]], ...]) -> dict[str, int]:
    """Validate with jsonschema and with the models; both must accept every manifest."""
    counts: dict[str, int] = {}
    disagreements = []
    for where, manifest in manifests:
        kind = manifest["kind"]
        by_schema, by_model = schema_accepts(manifest), model_accepts(manifest)
        if not (by_schema and by_model):
            disagreements.append(f"{where} {kind}: jsonschema={by_schema} model={by_model}")
        counts[kind] = counts.get(kind, 0) + 1
    assert not disagreements, "\n".join(disagreements[:20])
    return counts


def test_catalog_sample_validates_with_jsonschema_and_models() -> None:
    """Every 20th catalog manifest (about 1,800, under a second)."""
    counts = _sweep(catalog_manifests()[::20])
    assert set(counts) >= {"BenchmarkRun", "WorkloadCase", "ImplementationRevision", "ServingRun"}


@pytest.mark.slow
def test_every_catalog_manifest_validates_with_jsonschema_and_models() -> None:
    """All 35,458 manifests in the export (8-12 s, nearly all of it in jsonschema)."""
    started = time.perf_counter()
    counts = _sweep(catalog_manifests())
    assert set(counts) == set(manifest_models())
    assert sum(counts.values()) == 35458
    elapsed = time.perf_counter() - started
    print(f"checked {sum(counts.values())} catalog manifests in {elapsed:.1f}s: {counts}")


# --- required rejections ----------------------------------------------------------------------

mutation_settings = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


Selector = Callable[[Loc, Json, dict[str, Json]], bool]


@functools.cache
def _targets(select: Selector) -> tuple[tuple[int, Loc, dict[str, Json]], ...]:
    """``(sample index, location, subschema)`` of every sample node that ``select`` picks."""
    found = [
        (index, path, sub)
        for index, doc in enumerate(mutation_samples())
        for path, value, sub in nodes(doc, schemas()[doc["kind"]])
        if select(path, value, sub)
    ]
    assert found, f"no node in the samples for {select.__name__}"
    return tuple(found)


def _draw_target(
    data: st.DataObject, select: Selector
) -> tuple[dict[str, Json], Loc, dict[str, Json]]:
    index, path, sub = data.draw(st.sampled_from(_targets(select)), label="target")
    return mutation_samples()[index], path, sub


def _is_nested_closed_object(path: Loc, value: Json, sub: dict[str, Json]) -> bool:
    return len(path) >= 2 and isinstance(value, dict) and is_closed_object(sub)


def _has_present_required(path: Loc, value: Json, sub: dict[str, Json]) -> bool:
    return isinstance(value, dict) and any(key in value for key in sub.get("required", []))


def _is_enum(path: Loc, value: Json, sub: dict[str, Json]) -> bool:
    return "enum" in sub


def _is_digest(path: Loc, value: Json, sub: dict[str, Json]) -> bool:
    return sub.get("pattern") == SHA256_PATTERN


def _is_bounded_string(path: Loc, value: Json, sub: dict[str, Json]) -> bool:
    return isinstance(value, str) and "maxLength" in sub


def _expects_number(path: Loc, value: Json, sub: dict[str, Json]) -> bool:
    return bool(leaf_types(sub) & {"number", "integer"})


def _expects_integer(path: Loc, value: Json, sub: dict[str, Json]) -> bool:
    return "integer" in leaf_types(sub)


@pytest.mark.parametrize("where", [(), ("metadata",), ("spec",)], ids=["top", "metadata", "spec"])
def test_unknown_field_is_rejected(where: Loc) -> None:
    for doc in mutation_samples():
        assert_both_reject(
            with_value(doc, (*where, "unexpectedField"), 1), (*where, "unexpectedField")
        )


@mutation_settings
@given(data=st.data())
def test_unknown_field_in_a_nested_object_is_rejected(data: st.DataObject) -> None:
    doc, path, _ = _draw_target(data, _is_nested_closed_object)
    name = data.draw(st.sampled_from(["unexpectedField", "extra", "kind_", "Spec"]), label="name")
    assume(name not in get_at(doc, path))
    assert_both_reject(with_value(doc, (*path, name), "x"), (*path, name))


@mutation_settings
@given(data=st.data())
def test_removing_a_required_field_is_rejected(data: st.DataObject) -> None:
    doc, path, schema = _draw_target(data, _has_present_required)
    present = [key for key in schema["required"] if key in get_at(doc, path)]
    key = data.draw(st.sampled_from(present), label="key")
    assert_both_reject(without(doc, (*path, key)), (*path, key))


@mutation_settings
@given(data=st.data())
def test_replacing_an_enum_value_is_rejected(data: st.DataObject) -> None:
    doc, path, _ = _draw_target(data, _is_enum)
    replacement = data.draw(
        st.sampled_from(["no_such_value", "", "PASSED", "valid "]), label="value"
    )
    assert_both_reject(with_value(doc, path, replacement), path)


@mutation_settings
@given(data=st.data())
def test_breaking_a_digest_is_rejected(data: st.DataObject) -> None:
    doc, path, _ = _draw_target(data, _is_digest)
    digest = get_at(doc, path)
    broken = data.draw(
        st.sampled_from(
            [
                digest.upper(),
                digest[:-1],
                digest + "0",
                "sha512:" + digest[7:],
                " " + digest,
                digest.replace("sha256:", ""),
            ]
        ),
        label="broken",
    )
    assert_both_reject(with_value(doc, path, broken), path)


@mutation_settings
@given(data=st.data())
def test_a_too_long_string_is_rejected(data: st.DataObject) -> None:
    doc, path, schema = _draw_target(data, _is_bounded_string)
    assert_both_reject(with_value(doc, path, "a" * (schema["maxLength"] + 1)), path)


@mutation_settings
@given(data=st.data())
def test_a_bool_where_a_number_is_expected_is_rejected(data: st.DataObject) -> None:
    doc, path, _ = _draw_target(data, _expects_number)
    assert_both_reject(with_value(doc, path, data.draw(st.booleans(), label="bool")), path)


@mutation_settings
@given(data=st.data())
def test_a_string_where_an_integer_is_expected_is_rejected(data: st.DataObject) -> None:
    doc, path, _ = _draw_target(data, _expects_integer)
    assert_both_reject(with_value(doc, path, "5"), path)


# --- agreement at every schema location -------------------------------------------------------

GENERIC: list[Json] = [
    None, True, False, 0, 1, -1, 0.0, -0.0, 1.5, 3.0, 1e300, "", "5", "a", "Abc", [], [1], ["a"],
    {}, {"a": 1},
]  # fmt: skip

# For every pattern in the schemas: a matching string first, then near misses. Nothing here is
# read differently by ECMA-262 and by Python's ``re`` (see the module docstring).
PATTERN_PROBES: dict[str, list[str]] = {
    "^[a-z][a-z0-9_]*$": ["a_key", "a", "a1_b", "Abc", "1a", "_a", "a-b", "a b", ""],
    "^[a-z0-9][a-z0-9._-]*$": ["name-1.0_x", "0", "-a", ".a", "aBc", "a b", ""],
    "^[a-z0-9][a-z0-9-]*$": ["sol-execbench", "0", "a_b", "a.b", "-a", "A", ""],
    "^sha256:[0-9a-f]{64}$": [
        "sha256:" + "0" * 64, "sha256:" + "A" * 64, "sha256:" + "0" * 63, "sha256:" + "0" * 65,
        "sha512:" + "0" * 64, "0" * 64,
    ],
    "^[0-9a-f]{40}$": ["0" * 40, "a" * 39, "a" * 41, "g" * 40, "A" * 40],
    "^[a-z0-9_+\\-*%/() ]+$": ["(a + b) * 2", "a % b / c - d", "A", "a^b", "a;b", ""],
    "^\\d+(\\.\\d+)?\\s?(ns|us|µs|ms|s)$": [
        "10 ns", "0.008 ms", "3\u00b5s", "2us", "1s", "1.5 s", "7\u00a0ms", "7\u2003ms", "1. s",
        ".5 ms", "1e3 ns", "3 \u03bcs", "5", "5 ms ", "5  ms", " 5 ms", "5 m", "-5 ms", "5 MS",
    ],
    "^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29"
    "|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)"
    "|(?:02)-(?:0[1-9]|1\\d|2[0-8])))T(?:(?:[01]\\d|2[0-3]):[0-5]\\d(?::[0-5]\\d(?:\\.\\d+)?)?"
    "(?:Z))$": [
        "2026-08-22T11:05:31.586Z", "2024-02-29T00:00Z", "2000-02-29T00:00:00Z",
        "2026-12-31T23:59:59Z", "1900-02-29T00:00:00Z", "2023-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z", "2026-08-22T24:00:00Z", "2026-08-22T11:05:60Z",
        "2026-08-22T11:05:31.Z", "2026-08-22T11:05:31+00:00", "2026-08-22 11:05:31Z",
        "2026-08-22T11:05:31z", "2026-08-22",
    ],
}  # fmt: skip


def edge_values(schema: dict[str, Json] | None) -> list[Json]:
    """Generic values of every JSON type, plus values at and just past the subschema's limits."""
    values = list(GENERIC)
    for option in [] if schema is None else [schema, *schema.get("anyOf", [])]:
        if "enum" in option:
            values += [*option["enum"], "no_such_value"]
        if "const" in option:
            values += [option["const"], option["const"] + "x"]
        for bound in ("minimum", "maximum", "exclusiveMinimum"):
            if bound in option:
                edge = option[bound]
                values += [edge, edge - 1, edge + 1, float(edge), edge + 0.5]
        if "maxLength" in option:
            values += ["a" * option["maxLength"], "a" * (option["maxLength"] + 1)]
        values += PATTERN_PROBES.get(option.get("pattern", ""), [])
    return values


def full_instance(schema: dict[str, Json]) -> Json:
    """A valid instance with every property present, every map and array non-empty."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return full_instance(schema["anyOf"][0])
    kind = schema["type"]
    if kind == "object" and "properties" in schema:
        return {name: full_instance(sub) for name, sub in schema["properties"].items()}
    if kind == "object":
        names = schema["propertyNames"]
        key = PATTERN_PROBES[names["pattern"]][0] if "pattern" in names else "SOME_NAME"
        return {key: full_instance(schema["additionalProperties"])}
    if kind == "array":
        return [full_instance(sub) for sub in schema.get("prefixItems", [schema.get("items")])]
    if kind == "string":
        return PATTERN_PROBES[schema["pattern"]][0] if "pattern" in schema else "text"
    # 1 and 0.5 meet every numeric constraint in these schemas.
    return {"integer": 1, "number": 0.5, "boolean": True}[kind]


def _all_patterns(schema: Json) -> Iterator[str]:
    if isinstance(schema, dict):
        if isinstance(schema.get("pattern"), str):
            yield schema["pattern"]
        for value in schema.values():
            yield from _all_patterns(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _all_patterns(value)


def test_every_schema_pattern_has_probes() -> None:
    patterns = {p for schema in schemas().values() for p in _all_patterns(schema)}
    assert patterns == set(PATTERN_PROBES)
    for pattern, probes in PATTERN_PROBES.items():
        assert re.search(pattern, probes[0]), pattern


def _mutations_at(
    doc: Json, path: Loc, value: Json, sub: dict[str, Json]
) -> Iterator[tuple[str, Json]]:
    """Single-step changes at one location: edge values, deletion, extra keys (unknown fields,
    map keys at the propertyNames limits), arrays at their length limits."""
    if path:
        for edge in edge_values(sub):
            yield f"{dotted(path)} = {edge!r:.60}", with_value(doc, path, edge)
        yield f"delete {dotted(path)}", without(doc, path)
    if isinstance(value, dict) and is_closed_object(sub):
        yield f"{dotted(path)}: unknown field", with_value(doc, (*path, "unexpectedField"), 1)
    elif isinstance(value, dict):
        names = sub["propertyNames"]
        keys: list[Json] = [*PATTERN_PROBES.get(names.get("pattern", ""), [])]
        if "maxLength" in names:
            keys += ["N" * names["maxLength"], "N" * (names["maxLength"] + 1)]
        entry = full_instance(sub["additionalProperties"])
        for key in [*keys, 5]:
            yield f"{dotted(path)}: key {key!r:.40}", with_value(doc, (*path, key), entry)
    elif isinstance(value, list) and value:
        limits = {0, sub.get("minItems", 1) - 1, sub.get("maxItems", 2), sub.get("maxItems", 2) + 1}
        for count in sorted(limits):
            yield f"{dotted(path)}: {count} items", with_value(doc, path, [value[0]] * count)
        if "prefixItems" in sub:
            yield f"{dotted(path)}: extra item", with_value(doc, path, [*value, {"any": 1}])


@pytest.mark.parametrize("kind", sorted(manifest_models()))
def test_model_and_jsonschema_agree_at_every_schema_location(kind: str) -> None:
    """Exhaustive one-step mutations of a manifest that fills every field of the schema."""
    schema = schemas()[kind]
    doc = full_instance(schema)
    assert schema_accepts(doc) and model_accepts(doc)
    disagreements = []
    changes = (c for node in nodes(doc, schema) for c in _mutations_at(doc, *node))
    for what, mutated in changes:
        by_schema, by_model = schema_accepts(mutated), model_accepts(mutated)
        if by_schema != by_model:
            disagreements.append(f"{what}: jsonschema={by_schema} model={by_model}")
    assert not disagreements, "\n".join(disagreements[:20])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_model_and_jsonschema_agree_on_mutations_of_sample_manifests(data: st.DataObject) -> None:
    doc = data.draw(st.sampled_from(mutation_samples()), label="manifest")
    node = data.draw(st.sampled_from(list(nodes(doc, schemas()[doc["kind"]]))), label="location")
    changes = list(_mutations_at(doc, *node))
    what, mutated = data.draw(st.sampled_from(changes), label="mutation")
    by_schema, by_model = schema_accepts(mutated), model_accepts(mutated)
    event("mutation accepted" if by_schema else "mutation rejected")
    assert by_schema == by_model, f"{what}: jsonschema={by_schema} model={by_model}"


# --- semantics the schema implies, pinned explicitly ------------------------------------------


def _run_with(path: Loc, value: Json) -> dict[str, Json]:
    return with_value(seed_manifests()["run"], path, value)  # type: ignore[no-any-return]


LATENCY = ("spec", "timing", "latencyNs")


@pytest.mark.parametrize(
    ("path", "value", "accepted"),
    [
        (("spec", "timing", "samples"), 3, True),
        (("spec", "timing", "samples"), 3.0, True),  # JSON Schema: an integral float is an integer
        (("spec", "timing", "samples"), 3.5, False),
        (("spec", "timing", "samples"), "3", False),
        (("spec", "timing", "samples"), True, False),
        (("spec", "timing", "samples"), 0, False),  # exclusiveMinimum 0
        (("spec", "timing", "samples"), MAX_SAFE_INTEGER, True),
        (("spec", "timing", "samples"), MAX_SAFE_INTEGER + 1, False),
        (("spec", "sourceNative", "metrics", "x"), 2, True),
        (("spec", "sourceNative", "metrics", "x"), -2.5, True),
        (("spec", "sourceNative", "metrics", "x"), False, False),
        (("spec", "sourceNative", "metrics", "x"), "2", False),
        (("spec", "sourceNative", "metrics", "x"), None, False),
        (("spec", "evidence"), {}, True),
        (("spec", "evidence"), None, False),  # optional means absent, never null
        (("metadata", "title"), None, False),
        (("metadata", "labels", "bad-key"), "x", False),  # propertyNames
        ((*LATENCY, "mean"), "0.008 ms", True),
        ((*LATENCY, "mean"), "12ns", True),
        ((*LATENCY, "mean"), "3 \u00b5s", True),
        ((*LATENCY, "mean"), "3 \u03bcs", False),  # Greek mu is not the schema's micro sign
        ((*LATENCY, "mean"), "3 ms ", False),
        ((*LATENCY, "mean"), 8000.0, True),
        ((*LATENCY, "mean"), -1, False),
        ((*LATENCY, "confidence95"), [], True),  # prefixItems: no minItems, no maxItems
        ((*LATENCY, "confidence95"), [5], True),
        ((*LATENCY, "confidence95"), [5, "1 ms", "anything", {}], True),
        ((*LATENCY, "confidence95"), ["x"], False),
        ((*LATENCY, "confidence95"), [1, True], False),
        ((*LATENCY, "confidence95"), {"0": 1}, False),
        (
            ("spec", "observedAt"),
            "2024-02-29T23:59Z",
            True,
        ),  # the schema's pattern allows no seconds
        (("spec", "observedAt"), "2023-02-29T23:59:00Z", False),
        (("spec", "observedAt"), "2026-08-22T11:05:31+00:00", False),
    ],
)
def test_json_schema_semantics(path: Loc, value: Json, accepted: bool) -> None:
    doc = _run_with(path, value)
    assert schema_accepts(doc) is accepted
    assert model_accepts(doc) is accepted


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("metadata", "name"), "sol-submission-38823\n"),  # ECMA ``$`` is the very end
        (("spec", "protocolDigest"), "sha256:" + "0" * 64 + "\n"),
        (("spec", "timing", "primaryStatistic"), "mean\n"),
        ((*LATENCY, "mean"), "\u0663 ms"),  # ECMA ``\d`` is ASCII (this is ARABIC-INDIC THREE)
        ((*LATENCY, "mean"), "3\u0085ms"),  # NEL is not ECMA whitespace
        (("spec", "observedAt"), "\u0662\u0660\u0662\u0666-08-22T11:05:31Z"),
    ],
)
def test_patterns_follow_ecma_262(path: Loc, value: Json) -> None:
    # The Python jsonschema library accepts some of these (Python ``re`` semantics); the
    # schemas' patterns are ECMA-262, so the models must reject them all.
    assert not model_accepts(_run_with(path, value))


def test_ecma_whitespace_in_durations() -> None:
    for space in ("\t", "\u00a0", "\u2003", "\ufeff"):
        assert model_accepts(_run_with((*LATENCY, "mean"), f"3{space}ms")), repr(space)


def test_non_finite_numbers_are_rejected() -> None:
    # Not JSON at all (json.loads would produce them from NaN/Infinity); never a valid number.
    for value in (float("nan"), float("inf"), float("-inf")):
        assert not model_accepts(_run_with(("spec", "sourceNative", "metrics", "x"), value))


# --- error messages and the registry contract ------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ((*LATENCY, "foo"), 1, "spec.timing.latencyNs.foo: unknown field"),
        (
            ("spec", "protocolDigest"),
            "sha256:XYZ",
            "spec.protocolDigest: must match pattern ^sha256:[0-9a-f]{64}$",
        ),
        (
            ("metadata", "labels", "Bad"),
            "x",
            "metadata.labels.Bad: invalid property name: must match pattern ^[a-z][a-z0-9_]*$",
        ),
    ],
)
def test_error_message_names_the_kind_and_the_location(
    path: Loc, value: Json, message: str
) -> None:
    # msgspec stops at the first error (pydantic listed each): one location per message.
    with pytest.raises(ManifestError) as caught:
        validate_manifest(_run_with(path, value))
    assert caught.value.message == f"BenchmarkRun: {message}"
    assert caught.value.code == "schema-violation"


def test_many_errors_are_reported_one_at_a_time() -> None:
    doc = copy.deepcopy(seed_manifests()["run"])
    doc["spec"].update({f"extra{i}": i for i in range(30)})
    with pytest.raises(ManifestError) as caught:
        validate_manifest(doc)
    assert re.fullmatch(r"BenchmarkRun: spec\.extra[0-9]+: unknown field", caught.value.message)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "manifest must be a JSON object, not an array"),
        ({"apiVersion": API_VERSION}, "manifest: kind: required field missing"),
        ({"kind": ["BenchmarkRun"]}, "manifest: kind: must be a string"),
        ({"kind": "Benchmark"}, "manifest: kind: unknown kind 'Benchmark'"),
        (
            {"kind": "BenchmarkRun", "apiVersion": "kernelindex.dev/v1"},
            "BenchmarkRun: apiVersion: must be",
        ),
        (
            {"kind": "BenchmarkRun", "apiVersion": API_VERSION},
            "BenchmarkRun: metadata: required field missing",
        ),
    ],
)
def test_envelope_errors(doc: Json, message: str) -> None:
    with pytest.raises(ManifestError) as caught:
        validate_manifest(doc)
    assert caught.value.message.startswith(message)


def test_validation_does_not_mutate_input() -> None:
    doc = _run_with((*LATENCY, "p95"), "0.008 ms")
    doc["spec"]["timing"]["samples"] = 4.0
    before = copy.deepcopy(doc)
    validate_manifest(doc)
    assert doc == before
    assert isinstance(doc["spec"]["timing"]["samples"], float)
