"""Manifest digests (DESIGN.md §4): the pinned seed digests, duration conversion, set-like list
canonicalisation, metadata exclusion, and conformance with every manifest in the KernelIndex
catalog snapshot."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.canonical import canonical_json, digest_of
from domain.errors import CanonicalizationError, ManifestError
from domain.manifests.canonical_form import (
    canonical_manifest,
    digest_input,
    duration_to_ns,
    manifest_digest,
)
from tests.paths import CONFORMANCE

SHARED = CONFORMANCE
CATALOG = SHARED / "fixtures" / "kernelindex-catalog" / "catalog-2026-08-16-0022af0b.jsonl.zst"

RUN_DIGEST = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
PROTOCOL_DIGEST = "sha256:6383f62490dad270ad2146a94f67b48fba5cfcbc0b9b180f02665c69cc4433a0"
ENVIRONMENT_DIGEST = "sha256:f304afb2fedab4bbeadf8ac36a990ff517ab6e824dfe5a3ee0fe46259ff5e39f"

LATENCY_STATISTICS = ("median", "mean", "p05", "p95", "minimum", "maximum", "mad")
SET_LIKE = ("hardwareArchitectures", "productsTested", "axes", "dtypes", "layouts")

IMPLEMENTATION: dict[str, Any] = {
    "apiVersion": "kernelindex.dev/v1alpha1",
    "kind": "ImplementationRevision",
    "metadata": {"name": "kernelbot-submission-30771", "title": "amd-fp8-mm · submission 30771"},
    "spec": {
        "projectRevision": {"version": "submission-30771"},
        "operation": {"specDigest": "sha256:" + "a1" * 32},
        "callable": {"language": "python"},
        "support": {
            "hardwareArchitectures": ["gfx942", "sm_90"],
            "productsTested": ["AMD Instinct MI300X", "NVIDIA H100"],
            "axes": ["m", "n"],
            "dtypes": ["fp32", "fp8_e4m3fnuz"],
            "layouts": ["row_major"],
        },
        "licensing": {},
    },
}


@pytest.fixture(scope="module")
def seed(seed_path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(seed_path.read_bytes())
    return value


def _with(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of doc with the dotted path set to value."""
    result = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = result
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return result


# --- the seed record ------------------------------------------------------------------------------


def test_seed_digests_are_the_pinned_ones(seed: dict[str, Any]) -> None:
    assert manifest_digest(seed["run"]) == RUN_DIGEST
    assert manifest_digest(seed["protocol"]) == PROTOCOL_DIGEST
    assert manifest_digest(seed["environment"]) == ENVIRONMENT_DIGEST
    # and the run names its protocol and environment by those digests
    assert seed["run"]["spec"]["protocolDigest"] == PROTOCOL_DIGEST
    assert seed["run"]["spec"]["environmentDigest"] == ENVIRONMENT_DIGEST


def test_digest_rule_is_sha256_of_jcs_of_apiversion_kind_spec(seed: dict[str, Any]) -> None:
    for doc in (seed["run"], seed["protocol"], seed["environment"]):
        covered = {"apiVersion": doc["apiVersion"], "kind": doc["kind"], "spec": doc["spec"]}
        assert digest_input(canonical_manifest(doc)) == covered
        independent = "sha256:" + hashlib.sha256(rfc8785.dumps(covered)).hexdigest()
        assert manifest_digest(doc) == independent


def test_canonical_form_adds_nothing_and_does_not_mutate(seed: dict[str, Any]) -> None:
    for part in ("run", "protocol", "environment"):
        original = copy.deepcopy(seed[part])
        canonical = canonical_manifest(seed[part])
        assert seed[part] == original
        assert canonical == original  # no defaults filled, nothing dropped
        assert canonical is not seed[part]
    # a duration in text form is converted in the result but not in the input
    run = _with(seed["run"], "spec.timing.latencyNs.mean", "1.750693 ms")
    canonical = canonical_manifest(run)
    assert canonical["spec"]["timing"]["latencyNs"] == {"mean": 1750693}
    assert run["spec"]["timing"]["latencyNs"] == {"mean": "1.750693 ms"}


def test_schema_violations_are_refused(seed: dict[str, Any]) -> None:
    with pytest.raises(ManifestError, match="unknown field"):
        manifest_digest(_with(seed["run"], "spec.bogus", 1))
    with pytest.raises(ManifestError, match="unknown field"):
        manifest_digest(_with(seed["run"], "metadata.bogus", 1))  # metadata is still checked
    with pytest.raises(ManifestError, match="unknown kind"):
        manifest_digest(_with(seed["run"], "kind", "Bogus"))
    with pytest.raises(ManifestError, match="apiVersion"):
        manifest_digest(_with(seed["run"], "apiVersion", "kernelindex.dev/v1"))
    with pytest.raises(ManifestError):
        manifest_digest([seed["run"]])


# --- durations ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0.008 ms", 8000),
        ("0.008ms", 8000),
        ("1.750693 ms", 1750693),
        ("1.750693ms", 1750693),
        ("8 us", 8000),
        ("8us", 8000),
        ("8 \u00b5s", 8000),
        ("8\u00b5s", 8000),
        ("2.5 us", 2500),
        ("1 s", 1_000_000_000),
        ("1s", 1_000_000_000),
        ("0.000000001 s", 1),
        ("1.5 s", 1_500_000_000),
        ("12 ns", 12),
        ("12ns", 12),
        ("12.000 ns", 12),
        ("0 ms", 0),
        ("0.1 us", 100),
        ("9007199.254740991 s", 2**53 - 1),
    ],
)
def test_duration_text_converts_exactly(text: str, ns: int) -> None:
    result = duration_to_ns(text, "here")
    assert result == ns
    assert type(result) is int


@pytest.mark.parametrize("value", [0, 1, 1750693, 2**53 - 1])
def test_integer_durations_pass_through(value: int) -> None:
    assert duration_to_ns(value, "here") == value


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("0.0000001 ms", "not a whole number of nanoseconds"),
        ("1.5 ns", "ambiguous"),
        ("0.0001 us", "ambiguous"),
        ("0.0000000001 s", "ambiguous"),
        ("9007199.254740992 s", "largest safe integer"),
        ("-1 ms", "not a duration"),
        ("1 h", "not a duration"),
        ("1 ms ", "not a duration"),
        (" 1 ms", "not a duration"),
        ("1  ms", "not a duration"),
        ("1e3 ns", "not a duration"),
        (".5 ms", "not a duration"),
        ("1. ms", "not a duration"),
        ("1 MS", "not a duration"),
        ("1,5 ms", "not a duration"),
        ("ms", "not a duration"),
        ("", "not a duration"),
    ],
)
def test_bad_duration_text_is_rejected(text: str, word: str) -> None:
    with pytest.raises(CanonicalizationError, match=word) as info:
        duration_to_ns(text, "spec.x")
    assert "spec.x" in str(info.value)


@pytest.mark.parametrize("stat", LATENCY_STATISTICS)
@pytest.mark.parametrize(
    ("text", "ns"), [("1.750693 ms", 1750693), ("1750.693 us", 1750693), ("1750693ns", 1750693)]
)
def test_every_latency_statistic_is_converted(
    seed: dict[str, Any], stat: str, text: str, ns: int
) -> None:
    as_text = _with(seed["run"], f"spec.timing.latencyNs.{stat}", text)
    as_int = _with(seed["run"], f"spec.timing.latencyNs.{stat}", ns)
    assert canonical_manifest(as_text)["spec"]["timing"]["latencyNs"][stat] == ns
    assert manifest_digest(as_text) == manifest_digest(as_int)


@pytest.mark.parametrize("stat", LATENCY_STATISTICS)
def test_fractional_latency_statistic_is_rejected_with_its_path(
    seed: dict[str, Any], stat: str
) -> None:
    doc = _with(seed["run"], f"spec.timing.latencyNs.{stat}", "0.0000001 ms")
    with pytest.raises(CanonicalizationError, match="whole number") as info:
        manifest_digest(doc)
    assert f"BenchmarkRun: spec.timing.latencyNs.{stat}" in str(info.value)


def test_no_conversion_changes_the_document_it_converts(seed: dict[str, Any]) -> None:
    """The canonical form shares what it leaves unchanged with the input; what it converts
    (durations, set-like lists) it converts in copies."""
    documents = [
        _with(seed["run"], "spec.timing.latencyNs", {"mean": "1 ms", "confidence95": ["1 us"]}),
        _with(seed["protocol"], "spec.measurement.warmupDuration", "250 ms"),
        _with(IMPLEMENTATION, "spec.support.dtypes", ["fp8", "fp32", "fp8"]),
    ]
    for document in documents:
        before = copy.deepcopy(document)
        canonical_manifest(document)
        manifest_digest(document)
        assert document == before


def test_seed_run_written_with_milliseconds_has_the_pinned_digest(seed: dict[str, Any]) -> None:
    assert seed["run"]["spec"]["timing"]["latencyNs"]["mean"] == 1750693
    for text in ("1.750693 ms", "1.750693ms", "1750.693 us", "1750.693 \u00b5s", "0.001750693 s"):
        run = _with(seed["run"], "spec.timing.latencyNs.mean", text)
        assert manifest_digest(run) == RUN_DIGEST


def test_confidence95_items_are_converted(seed: dict[str, Any]) -> None:
    as_text = _with(seed["run"], "spec.timing.latencyNs.confidence95", ["1.5 ms", "2000 us"])
    as_int = _with(seed["run"], "spec.timing.latencyNs.confidence95", [1500000, 2000000])
    mixed = _with(seed["run"], "spec.timing.latencyNs.confidence95", [1500000, "2 ms"])
    assert canonical_manifest(as_text)["spec"]["timing"]["latencyNs"]["confidence95"] == [
        1500000,
        2000000,
    ]
    assert manifest_digest(as_text) == manifest_digest(as_int) == manifest_digest(mixed)
    bad = _with(seed["run"], "spec.timing.latencyNs.confidence95", ["1 ms", "0.5 ns"])
    with pytest.raises(CanonicalizationError, match=r"confidence95\[1\]"):
        manifest_digest(bad)


def test_warmup_duration_is_converted(seed: dict[str, Any]) -> None:
    as_text = _with(seed["protocol"], "spec.measurement.warmupDuration", "0.25 s")
    as_int = _with(seed["protocol"], "spec.measurement.warmupDuration", 250_000_000)
    assert canonical_manifest(as_text)["spec"]["measurement"]["warmupDuration"] == 250_000_000
    assert manifest_digest(as_text) == manifest_digest(as_int)
    assert manifest_digest(as_text) != PROTOCOL_DIGEST  # the field counts once present
    bad = _with(seed["protocol"], "spec.measurement.warmupDuration", "0.0000001 ms")
    with pytest.raises(CanonicalizationError, match="warmupDuration"):
        manifest_digest(bad)


def test_durations_elsewhere_are_not_converted(seed: dict[str, Any]) -> None:
    # sourceNative metrics are numbers as the source published them; no duration text there.
    doc = _with(seed["run"], "spec.sourceNative.benchmark", "0.008 ms")
    assert canonical_manifest(doc)["spec"]["sourceNative"]["benchmark"] == "0.008 ms"


# --- set-like lists -----------------------------------------------------------------------------


_identifier = st.from_regex(r"\A[a-z][a-z0-9_]{0,10}\Z")
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
_SET_STRATEGIES = {
    "hardwareArchitectures": _identifier,
    "productsTested": _text,
    "axes": _text,
    "dtypes": _identifier,
    "layouts": _text,
}


@st.composite
def _support_and_shuffle(draw: st.DrawFn) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """A support block and the same sets written in another order with repeats."""
    first: dict[str, list[str]] = {}
    second: dict[str, list[str]] = {}
    for field in SET_LIKE:
        values = draw(st.lists(_SET_STRATEGIES[field], min_size=1, max_size=6, unique=True))
        repeated = values + draw(st.lists(st.sampled_from(values), max_size=4))
        first[field] = values
        second[field] = draw(st.permutations(repeated))
    return first, second


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_support_and_shuffle())
def test_set_like_lists_are_sorted_and_deduplicated(
    pair: tuple[dict[str, list[str]], dict[str, list[str]]],
) -> None:
    first, second = pair
    a = _with(IMPLEMENTATION, "spec.support", first)
    b = _with(IMPLEMENTATION, "spec.support", second)
    assert manifest_digest(a) == manifest_digest(b)
    support = canonical_manifest(b)["spec"]["support"]
    for field in SET_LIKE:
        items = support[field]
        assert len(items) == len(set(items)) == len(first[field])
        keys = [s.encode("utf-16-be") for s in items]
        assert keys == sorted(keys)


def test_set_like_lists_sort_by_utf16_code_units() -> None:
    doc = _with(IMPLEMENTATION, "spec.support.productsTested", ["\uffff", "\U0001f600", "B", "a"])
    sorted_products = canonical_manifest(doc)["spec"]["support"]["productsTested"]
    assert sorted_products == ["B", "a", "\U0001f600", "\uffff"]  # not code point order


def test_set_like_canonical_form_of_the_example() -> None:
    doc = _with(
        IMPLEMENTATION,
        "spec.support",
        {
            "hardwareArchitectures": ["sm_90", "gfx942", "sm_90"],
            "dtypes": ["fp8_e4m3fnuz", "fp32"],
            "layouts": ["row_major", "row_major"],
        },
    )
    assert canonical_manifest(doc)["spec"]["support"] == {
        "hardwareArchitectures": ["gfx942", "sm_90"],
        "dtypes": ["fp32", "fp8_e4m3fnuz"],
        "layouts": ["row_major"],
    }  # absent productsTested and axes stay absent
    assert manifest_digest(doc) != manifest_digest(IMPLEMENTATION)


def test_order_of_other_lists_matters(seed: dict[str, Any]) -> None:
    variants = [
        {"name": "a", "install": {"kind": "pip", "package": "a"}},
        {"name": "b", "install": {"kind": "pip", "package": "b"}},
    ]
    forward = _with(IMPLEMENTATION, "spec.buildVariants", variants)
    backward = _with(IMPLEMENTATION, "spec.buildVariants", variants[::-1])
    assert manifest_digest(forward) != manifest_digest(backward)

    measurements = [
        {"metric": "latency", "unit": "ns", "statistic": "mean", "value": 1},
        {"metric": "latency", "unit": "ns", "statistic": "median", "value": 2},
    ]
    run_a = _with(seed["run"], "spec.measurements", measurements)
    run_b = _with(seed["run"], "spec.measurements", measurements[::-1])
    assert manifest_digest(run_a) != manifest_digest(run_b)

    interval_a = _with(seed["run"], "spec.timing.latencyNs.confidence95", [1, 2])
    interval_b = _with(seed["run"], "spec.timing.latencyNs.confidence95", [2, 1])
    assert manifest_digest(interval_a) != manifest_digest(interval_b)

    # duplicates in an ordered list are kept, not removed
    doubled = _with(seed["run"], "spec.measurements", measurements + measurements[:1])
    assert len(canonical_manifest(doubled)["spec"]["measurements"]) == 3
    assert manifest_digest(doubled) != manifest_digest(run_a)


# --- metadata never contributes -----------------------------------------------------------------


_metadata = st.fixed_dictionaries(
    {"name": st.from_regex(r"\A[a-z0-9][a-z0-9._-]{0,30}\Z")},
    optional={
        "title": st.text(max_size=50),
        "description": st.text(max_size=100),
        "labels": st.dictionaries(_identifier, st.text(max_size=20), max_size=3),
        "sourceRefs": st.lists(st.fixed_dictionaries({"url": st.text(max_size=30)}), max_size=2),
    },
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_metadata)
def test_metadata_never_changes_the_digest(metadata: dict[str, Any]) -> None:
    doc = _with(IMPLEMENTATION, "metadata", metadata)
    assert manifest_digest(doc) == manifest_digest(IMPLEMENTATION)


def test_seed_metadata_edits_keep_the_pinned_digests(seed: dict[str, Any]) -> None:
    edited = _with(seed["run"], "metadata", {"name": "renamed", "description": "changed"})
    assert manifest_digest(edited) == RUN_DIGEST
    edited = _with(seed["protocol"], "metadata.labels", {"team": "x"})
    assert manifest_digest(edited) == PROTOCOL_DIGEST
    edited = _with(seed["environment"], "metadata.title", "another title")
    assert manifest_digest(edited) == ENVIRONMENT_DIGEST


def test_spec_changes_do_change_the_digest(seed: dict[str, Any]) -> None:
    assert manifest_digest(_with(seed["run"], "spec.status", "timeout")) != RUN_DIGEST
    assert manifest_digest(_with(seed["run"], "spec.timing.latencyNs.mean", 1750694)) != RUN_DIGEST
    assert (
        manifest_digest(_with(seed["run"], "spec.sourceNative.externalId", "38824")) != RUN_DIGEST
    )


# --- the KernelIndex catalog snapshot -------------------------------------------------------------

# table → the row field that states the manifest's digest
STATED = {
    "workloads": "workloadDigest",
    "implementations": "implementationDigest",
    "operations": "semanticDigest",
    "serving_runs": "runDigest",
    "model_revisions": "modelDigest",
    "serving_stack_revisions": "stackDigest",
    "serving_configurations": "configurationDigest",
    "serving_workloads": "workloadDigest",
}
TABLES = ("benchmark_runs", *STATED)


@cache
def _catalog_rows() -> dict[str, list[dict[str, Any]]]:
    import zstandard

    rows: dict[str, list[dict[str, Any]]] = {table: [] for table in TABLES}
    with CATALOG.open("rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw)
        for line in io.TextIOWrapper(reader, encoding="utf-8"):
            record = json.loads(line)
            if record["table"] in rows:
                rows[record["table"]].append(record["row"])
    return rows


def _manifests(table: str, row: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(label, manifest, stated digest) for each manifest the row carries."""
    if table == "benchmark_runs":
        manifests = row["manifest"]
        run = manifests["run"]
        yield "run", run, row["runDigest"]
        yield "protocol", manifests["protocol"], run["spec"]["protocolDigest"]
        yield "environment", manifests["environment"], run["spec"]["environmentDigest"]
    else:
        yield table, row["manifest"], row[STATED[table]]


def _sweep(table: str, step: int) -> int:
    rows = _catalog_rows()[table]
    assert rows, f"no {table} rows in the catalog"
    checked = 0
    failures: list[str] = []
    for index, row in enumerate(rows[::step]):
        for label, manifest, stated in _manifests(table, row):
            checked += 1
            try:
                ours = manifest_digest(manifest)
            except Exception as exc:  # report every failure, not just the first
                failures.append(f"{table}[{index * step}] {label}: {type(exc).__name__}: {exc}")
                continue
            if ours != stated:
                failures.append(f"{table}[{index * step}] {label}: {ours} != stated {stated}")
    assert not failures, f"{len(failures)} of {checked} digests differ:\n" + "\n".join(
        failures[:20]
    )
    return checked


@pytest.mark.parametrize("table", TABLES)
def test_catalog_digests_match(table: str) -> None:
    """Every manifest in the snapshot (about 35,000 with protocols and environments; ~3 s)."""
    _sweep(table, 1)


def test_catalog_sweep_covers_the_whole_snapshot() -> None:
    rows = _catalog_rows()
    total = sum(sum(1 for _ in _manifests(t, row)) for t in TABLES for row in rows[t])
    assert total >= 27_000
    assert len(rows["benchmark_runs"]) > 7000


def test_catalog_yaml_round_trip_sample() -> None:
    """A sample of catalog manifests written as YAML digest the same as the JSON."""
    from ruamel.yaml import YAML

    from domain.documents import parse_yaml

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.allow_unicode = True
    rows = _catalog_rows()
    for table in TABLES:
        for row in rows[table][::400]:
            for _, manifest, stated in _manifests(table, row):
                buffer = io.StringIO()
                yaml.dump(manifest, buffer)
                parsed = parse_yaml(buffer.getvalue().encode("utf-8"))
                assert canonical_json(parsed) == canonical_json(manifest)
                assert manifest_digest(parsed) == stated


# --- the memo -------------------------------------------------------------------------------------


def _uncached(document: Any) -> str:
    return digest_of(digest_input(canonical_manifest(document)))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.timing.latencyNs.mean", True),  # JSON text would not tell these apart from 1
        ("spec.timing.latencyNs.mean", 1),
        ("spec.timing.latencyNs.mean", 1.0),
        ("spec.timing.latencyNs.mean", float("nan")),  # msgspec's JSON writes NaN as null
        ("spec.timing.latencyNs.mean", None),
        ("spec.timing.latencyNs.mean", "1 ns"),
        ("metadata.title", None),
        ("metadata.title", float("nan")),
        ("spec.status", ("passed",)),
    ],
)
def test_the_memo_never_answers_for_a_different_document(
    seed: dict[str, Any], path: str, value: Any
) -> None:
    """Each variant, asked after every other variant is cached, gets exactly the answer the
    uncached rule gives it: its own digest, or its own refusal."""
    variants = [_with(seed["run"], path, v) for v in (1, True, 1.0, None, "1 ns", value)]
    for variant in variants:
        with contextlib.suppress(ManifestError, CanonicalizationError):
            manifest_digest(variant)
    document = _with(seed["run"], path, value)
    try:
        expected: Any = _uncached(document)
    except (ManifestError, CanonicalizationError) as exc:
        expected = (type(exc), exc.message)
    try:
        got: Any = manifest_digest(document)
    except (ManifestError, CanonicalizationError) as exc:
        got = (type(exc), exc.message)
    assert got == expected


def test_the_digest_memo_forgets_its_oldest_and_answers_each_manifest_its_own_digest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past its bound the memo drops its oldest entries, never more than it holds; whatever
    it kept or forgot, every manifest gets the digest computed without it, and the newest
    ones are answered without validating them again."""
    from domain.manifests import canonical_form

    monkeypatch.setattr(canonical_form, "_DIGESTS", {})
    monkeypatch.setattr(canonical_form, "_DIGESTS_KEPT", 8)
    documents = [
        _with(IMPLEMENTATION, "spec.projectRevision.version", f"submission-{n}") for n in range(30)
    ]
    expected = [digest_of(digest_input(canonical_manifest(d))) for d in documents]
    assert len(set(expected)) == 30
    for n in (*range(30), 29, 3, 28, 0, *range(29, -1, -1)):
        assert manifest_digest(documents[n]) == expected[n]
        assert 1 <= len(canonical_form._DIGESTS) <= 8
    made: list[object] = []
    real = canonical_form._digest
    monkeypatch.setattr(canonical_form, "_digest", lambda d, j=False: made.append(d) or real(d, j))
    for n in range(5):  # the last five asked above
        assert manifest_digest(documents[n]) == expected[n]
    assert made == []
