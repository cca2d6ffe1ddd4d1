"""The fold's fast paths give the answers of the plain computation, for every input
(hypothesis). A projection rebuild folds every ingestion, so ``domain.comparison`` and
``domain.run_facts`` read a run's primary measurement once, check dicts before the
``Mapping`` ABC, remember strings seen to be digests, key correctness blocks of strings by
their items, and build a run's profile without the frozen ``__init__``. The reference below
is the computation as it was before those (f9cc555), with no memo at all: a run's profile,
evidence facts and comparison key, and the comparison components (trusted or not), must be
equal to it, or fail with the same error, on well-formed and malformed manifests alike, and
on the first call as on the next (caches filled).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import structs

from domain.canonical import digest_of, is_digest
from domain.comparison import (
    COMPARISON_KEY_VERSION,
    LATENCY_METRIC,
    LATENCY_UNIT,
    NO_MEASUREMENT,
    ComparisonComponents,
    ComparisonKeyError,
    PrimaryMeasurement,
    comparison_components,
    comparison_key,
    correctness_key_of,
)
from domain.errors import DigestMismatchError, DomainError, ManifestError
from domain.evidence import EvidenceState, IngestionFacts, ingestion_facts_from_manifests
from domain.manifests.canonical_form import canonical_manifest, digest_input, duration_to_ns
from domain.run_facts import (
    RunFold,
    RunProfile,
    comparison_key_of,
    ingestion_facts,
    ingestion_profile,
)

# --- the reference: the plain computation --------------------------------------------------------


def _ref_spec(document: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    spec = document.get("spec")
    if not isinstance(spec, Mapping):
        raise ManifestError(f"{what}: has no spec object")
    return spec


def _ref_digest_field(spec: Mapping[str, Any], field: str, what: str) -> str:
    value = spec.get(field)
    if not is_digest(value):
        raise ManifestError(f"{what}: spec.{field} must be a sha256:<64 hex> digest")
    assert isinstance(value, str)
    return value


def _ref_run_spec(run: Mapping[str, Any]) -> Mapping[str, Any]:
    if run.get("kind") != "BenchmarkRun":
        raise ManifestError(f"expected a BenchmarkRun manifest, got kind {run.get('kind')!r}")
    return _ref_spec(run, "BenchmarkRun")


def _ref_workload_spec(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    if workload.get("kind") not in ("WorkloadCase", "WorkloadSuite"):
        raise ManifestError(
            f"expected a WorkloadCase or WorkloadSuite manifest, got kind {workload.get('kind')!r}"
        )
    return _ref_spec(workload, str(workload["kind"]))


def _ref_correctness_key_of(block: Mapping[str, Any]) -> str:
    text = json.dumps(block, sort_keys=True, ensure_ascii=False)
    return digest_of({"correctness": json.loads(text)})


def _ref_latency_value(value: object, where: str) -> int | float | None:
    if value is None:
        return None
    converted = duration_to_ns(value, where)
    if isinstance(converted, bool) or not isinstance(converted, int | float):
        raise ManifestError(f"{where}: must be a number of ns or a duration, got {value!r}")
    return converted


def ref_readable_primary(run: Mapping[str, Any]) -> PrimaryMeasurement:
    """What folds read: the primary measurement, or none where it does not read."""
    try:
        return ref_primary(run)
    except DomainError:
        return NO_MEASUREMENT


def ref_primary(run: Mapping[str, Any]) -> PrimaryMeasurement:
    spec = _ref_run_spec(run)
    timing = spec.get("timing")
    if isinstance(timing, Mapping):
        statistic = timing.get("primaryStatistic")
        latency = timing.get("latencyNs")
        if not isinstance(statistic, str) or not isinstance(latency, Mapping):
            raise ManifestError(
                "BenchmarkRun: spec.timing needs primaryStatistic and a latencyNs object"
            )
        value = _ref_latency_value(latency.get(statistic), f"spec.timing.latencyNs.{statistic}")
        return PrimaryMeasurement(LATENCY_METRIC, statistic, LATENCY_UNIT, value)
    measurements = spec.get("measurements")
    if isinstance(measurements, list) and measurements:
        first = measurements[0]
        if not isinstance(first, Mapping):
            raise ManifestError("BenchmarkRun: spec.measurements[0] must be an object")
        metric, statistic, unit, value = (
            first.get("metric"),
            first.get("statistic"),
            first.get("unit"),
            first.get("value"),
        )
        if not (isinstance(metric, str) and isinstance(statistic, str) and isinstance(unit, str)):
            raise ManifestError("BenchmarkRun: spec.measurements[0] needs metric, statistic, unit")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ManifestError("BenchmarkRun: spec.measurements[0].value must be a number")
        return PrimaryMeasurement(metric, statistic, unit, value)
    return NO_MEASUREMENT


def ref_components(
    run: Mapping[str, Any],
    workload: Mapping[str, Any] | None,
    *,
    operation: str | None = None,
    correctness: Mapping[str, Any] | None = None,
    trusted: bool = False,
) -> ComparisonComponents:
    if not trusted:
        run = canonical_manifest(run)
        if workload is not None:
            workload = canonical_manifest(workload)
    stated = _ref_digest_field(_ref_run_spec(run), "workloadDigest", "BenchmarkRun")
    if workload is not None:
        if operation is not None or correctness is not None:
            raise ComparisonKeyError(
                "operation and correctness come from the workload manifest when one is given"
            )
        if not trusted:
            actual = digest_of(digest_input(workload))
            if actual != stated:
                raise DigestMismatchError(
                    f"the workload manifest digests to {actual}, but the run names {stated}"
                )
        operation = _ref_digest_field(
            _ref_workload_spec(workload), "operationSpecDigest", "workload"
        )
        block = _ref_workload_spec(workload).get("correctness")
        if not isinstance(block, Mapping):
            raise ManifestError("workload: spec.correctness must be an object")
        correctness_digest = _ref_correctness_key_of(block)
    else:
        if operation is None or correctness is None:
            raise ComparisonKeyError(
                f"the run's workload {stated} is unknown: its operation spec digest "
                "and correctness block are needed for a comparison key"
            )
        if not is_digest(operation):
            raise ComparisonKeyError(f"operation {operation!r} is not a sha256:<64 hex> digest")
        correctness_digest = _ref_correctness_key_of(correctness)
    return ComparisonComponents(
        operation=operation,
        workload=stated,
        protocol=_ref_digest_field(_ref_run_spec(run), "protocolDigest", "BenchmarkRun"),
        environment=_ref_digest_field(_ref_run_spec(run), "environmentDigest", "BenchmarkRun"),
        correctness=correctness_digest,
        metric=ref_primary(run).key,
    )


def ref_key(components: ComparisonComponents) -> str:
    return digest_of(components.as_json())


def ref_comparison_key_of(manifests: Mapping[str, Any]) -> str | None:
    workload = manifests.get("workload")
    if not isinstance(workload, Mapping):
        return None
    try:
        return ref_key(ref_components(manifests["run"], workload, trusted=True))
    except (ComparisonKeyError, DomainError):
        return None


def _ref_author(implementation: Any) -> str | None:
    if not isinstance(implementation, Mapping):
        return None
    authors = (implementation.get("metadata") or {}).get("authors")
    if not isinstance(authors, list):
        return None
    names = [str(a.get("name")) for a in authors if isinstance(a, Mapping) and a.get("name")]
    return ", ".join(names) or None


def ref_profile(run_digest: str, predicate: Mapping[str, Any]) -> RunProfile:
    manifests = predicate["manifests"]
    run = manifests["run"]
    spec = run.get("spec", {})
    native = spec.get("sourceNative") or {}
    hardware = (manifests.get("environment") or {}).get("spec", {}).get("hardware", {})
    primary = ref_readable_primary(run)
    return RunProfile(
        run_digest=run_digest,
        name=str(run.get("metadata", {}).get("name")),
        title=run.get("metadata", {}).get("title"),
        source=str(predicate.get("source")),
        external_id=predicate.get("externalId"),
        benchmark=native.get("benchmark"),
        status=str(spec.get("status")),
        comparison_key=ref_comparison_key_of(manifests),
        metric=primary.metric,
        statistic=primary.statistic,
        unit=primary.unit,
        claimed=float(primary.value) if primary.value is not None else None,
        product=hardware.get("product"),
        architecture=hardware.get("architecture"),
        observed_at=spec.get("observedAt"),
        protocol_digest=spec.get("protocolDigest"),
        environment_digest=spec.get("environmentDigest"),
        workload_digest=spec.get("workloadDigest"),
        author=_ref_author(manifests.get("implementation")),
    )


def ref_facts(position: int, predicate: Mapping[str, Any]) -> IngestionFacts:
    manifests = predicate["manifests"]
    implementation = manifests.get("implementation")
    pinned = isinstance(implementation, Mapping) and bool(
        (implementation.get("spec", {}).get("source") or {}).get("contentDigest")
    )
    run = manifests["run"]
    environment = manifests.get("environment") or {}
    spec = run.get("spec", {})
    evidence = spec.get("evidence") if isinstance(spec, Mapping) else None
    has_raw = isinstance(evidence, Mapping) and any(
        key in evidence for key in ("logs", "rawSamples")
    )
    hardware = environment.get("spec", {}).get("hardware", {})
    primary = ref_readable_primary(run)
    claimed = (
        primary.value
        if primary.is_latency and primary.value is not None and primary.value > 0
        else None
    )
    return IngestionFacts(
        position=position,
        status=str(spec.get("status")),
        has_pinned_source=pinned,
        has_raw_evidence=has_raw,
        product=hardware.get("product"),
        architecture=hardware.get("architecture"),
        primary_statistic=primary.statistic,
        claimed_ns=claimed,
    )


# --- inputs ---------------------------------------------------------------------------------------

digests = st.sampled_from(
    ["sha256:" + c * 64 for c in "0a7f"] * 6
    + ["sha256:" + "A" * 64, "sha256:abc", "", "sha256:" + "0" * 65]
)
short_text = st.text(max_size=6)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(-3, 2**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | short_text
)
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(short_text, inner, max_size=3),
    max_leaves=6,
)
flat_blocks = st.dictionaries(st.sampled_from(["comparator", "description", "x"]), short_text)
blocks = (
    st.one_of(
        flat_blocks, flat_blocks, flat_blocks, st.dictionaries(short_text, json_values, max_size=3)
    )
    | json_values
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The value, or now and then a missing field (the sentinel ``...``) or junk."""
    return st.sampled_from(["value"] * 28 + ["missing", "junk"]).flatmap(
        lambda n: st.just(...) if n == "missing" else json_values if n == "junk" else strategy
    )


def obj(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({k: maybe(v) for k, v in fields.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not ...}
    )


latencies = (
    st.integers(1, 10**9)
    | st.floats(0.5, 1e9)
    | st.sampled_from(["1.5 ms", "12 ns", "0.0005 ns", "x ms", "1e3 us"])
)
statistics = st.sampled_from(["mean", "median", "min"])
timing = st.builds(
    lambda stat, values: {"primaryStatistic": stat, "latencyNs": values},
    statistics,
    st.dictionaries(statistics, latencies | st.none(), max_size=2),
)
measurement = obj(
    metric=st.sampled_from(["score", "latency"]),
    statistic=statistics,
    unit=st.sampled_from(["s", "ns"]),
    value=st.integers(0, 100) | st.floats() | st.booleans(),
)
run_specs = obj(
    workloadDigest=digests,
    protocolDigest=digests,
    environmentDigest=digests,
    status=st.sampled_from(["passed", "runtime_error"]),
    observedAt=short_text,
    sourceNative=obj(benchmark=short_text),
    timing=timing,
    measurements=st.lists(measurement, max_size=2),
    evidence=obj(logs=short_text, rawSamples=st.lists(st.integers(), max_size=2)),
)
runs_ = obj(
    kind=st.sampled_from(["BenchmarkRun"] * 9 + ["WorkloadCase"]),
    metadata=obj(name=short_text, title=short_text),
    spec=run_specs,
)
workloads = obj(
    kind=st.sampled_from(["WorkloadCase", "WorkloadSuite"] * 4 + ["BenchmarkRun"]),
    spec=obj(operationSpecDigest=digests, correctness=blocks),
)
environments = obj(spec=obj(hardware=obj(product=short_text, architecture=short_text)))
implementations = obj(
    metadata=obj(authors=st.lists(obj(name=short_text), max_size=3)),
    spec=obj(source=obj(contentDigest=digests)),
)
predicates = st.fixed_dictionaries(
    {
        "manifests": obj(
            run=runs_,
            workload=workloads,
            environment=environments,
            implementation=implementations,
        ).filter(lambda m: "run" in m),
    },
    optional={"source": short_text, "externalId": short_text | st.none()},
)


def outcome(compute: Any, *args: Any, **kwargs: Any) -> Any:
    """What a computation gives, or the error it raises (type and message)."""
    try:
        return ("value", compute(*args, **kwargs))
    except Exception as exc:
        return ("error", type(exc), str(exc))


def same(a: Any, b: Any) -> bool:
    """Equal outcomes, NaN equal to NaN (a claim can be a NaN float)."""
    if a == b:
        return True
    if isinstance(a, float) and isinstance(b, float):
        return math.isnan(a) and math.isnan(b)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, RunProfile) and isinstance(b, RunProfile):
        return same(structs.astuple(a), structs.astuple(b))
    return False


FAST = settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@FAST
@given(predicates, st.integers(1, 10**6))
def test_a_runs_fold_at_ingestion_is_the_plain_computation(
    predicate: dict[str, Any], position: int
) -> None:
    digest = "sha256:" + "cd" * 32
    for _ in range(2):  # the second time, every cache holds what the first put there
        profile = outcome(ingestion_profile, digest, predicate)
        assert same(profile, outcome(ref_profile, digest, predicate))
        facts = outcome(ingestion_facts, position, predicate)
        assert same(facts, outcome(ref_facts, position, predicate))
        key = outcome(comparison_key_of, predicate["manifests"])
        assert key == outcome(ref_comparison_key_of, predicate["manifests"])
        fold = outcome(RunFold.ingested, position, digest, predicate)
        if profile[0] == "value" and facts[0] == "value":
            assert fold[0] == "value"
            assert same(fold[1].profile, profile[1])
            assert fold[1].state == EvidenceState.start(facts[1])
        else:
            assert fold[0] == "error"
            assert fold == (profile if profile[0] == "error" else facts)


@FAST
@given(runs_, workloads | st.none(), st.booleans())
def test_comparison_components_are_the_plain_computation(
    run: dict[str, Any], workload: dict[str, Any] | None, trusted: bool
) -> None:
    for _ in range(2):
        got = outcome(comparison_components, run, workload, trusted=trusted)
        assert same(got, outcome(ref_components, run, workload, trusted=trusted))
        key = outcome(comparison_key, run, workload, trusted=trusted)
        if got[0] == "value":
            assert key == ("value", ref_key(got[1])) == ("value", got[1].key)
        else:
            assert key == got


@FAST
@given(runs_, digests, blocks)
def test_components_without_a_workload_are_the_plain_computation(
    run: dict[str, Any], operation: str, correctness: Any
) -> None:
    for _ in range(2):
        got = outcome(
            comparison_components, run, None, operation=operation, correctness=correctness
        )
        want = outcome(ref_components, run, None, operation=operation, correctness=correctness)
        assert same(got, want)


@FAST
@given(blocks)
def test_a_correctness_key_is_the_plain_computation(block: Any) -> None:
    for _ in range(2):
        assert outcome(correctness_key_of, block) == outcome(_ref_correctness_key_of, block)


@FAST
@given(runs_, environments | st.just({}), st.booleans())
def test_evidence_facts_with_the_primary_read_once_are_the_plain_computation(
    run: dict[str, Any], environment: dict[str, Any], pinned: bool
) -> None:
    primary = outcome(ref_primary, run)
    plain = outcome(ingestion_facts_from_manifests, 7, run, environment, has_pinned_source=pinned)
    if primary[0] == "value":
        given_primary = outcome(
            ingestion_facts_from_manifests,
            7,
            run,
            environment,
            has_pinned_source=pinned,
            primary=primary[1],
        )
        assert same(given_primary, plain)


def test_the_key_version_is_hashed_as_before() -> None:
    parts = ComparisonComponents(*(["sha256:" + "0" * 64] * 5), metric="latency:mean:ns")
    assert parts.v == COMPARISON_KEY_VERSION
    assert parts.key == ref_key(parts)
