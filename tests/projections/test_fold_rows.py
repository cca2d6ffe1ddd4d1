"""A new run's row of the runs view (``view_rows.new_run_row``) is the row the older road
made: ``RunFold.ingested``, its profile built by keyword, ``profile_columns`` and
``evidence_columns`` read field by field. The new road builds the profile positionally,
folds no ``RunFold`` and reads the profile's fields as a dict (``msgspec.structs.asdict``).

* hypothesis: predicates made from the test runs' manifests, varied where the fold reads
  them (titles, statuses, measurements, hardware, implementations and their authors,
  evidence, workloads that do not read), give the same row, key for key in the same order,
  with the same types (or the same refusal);
* rebuilds: random event sequences (SQLite), a fixed sequence on both backends and a ledger
  of the projection benchmark's shape rebuild to the same views, row for row, with the older
  road patched in; a fold worker's task (``fold_range``) gives the same writer's rows.
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from projection_world import MANIFESTS, Clock, World
from sqlalchemy import select
from test_rebuild_property import (
    FIXED_SCRIPTS,
    KEYS,
    NOW,
    build_steps,
    feed,
    interleave,
    sequences,
    steps_of,
)

from benchmarks.bench_projections import bulk_ingest
from domain.comparison import MAPPINGS, NO_MEASUREMENT, readable_primary
from domain.evidence import (
    EvidenceLevel,
    EvidenceResult,
    EvidenceState,
    ingestion_facts_from_manifests,
)
from domain.run_facts import RunFold, RunProfile, comparison_key_of
from projections import run_views, view_rows
from projections.tables import VIEW_TABLES
from projections.view_rows import new_run_row

# --- the older road, as it was ---------------------------------------------------------------


def old_author(implementation: Any) -> str | None:
    if not isinstance(implementation, MAPPINGS):
        return None
    authors = (implementation.get("metadata") or {}).get("authors")
    if not isinstance(authors, list):
        return None
    names = [str(a.get("name")) for a in authors if isinstance(a, MAPPINGS) and a.get("name")]
    return ", ".join(names) or None


def old_profile(run_digest: str, predicate: Mapping[str, Any]) -> tuple[RunProfile, Any]:
    manifests = predicate["manifests"]
    run = manifests["run"]
    spec = run.get("spec", {})
    native = spec.get("sourceNative") or {}
    hardware = (manifests.get("environment") or {}).get("spec", {}).get("hardware", {})
    primary = readable_primary(run)
    metadata = run.get("metadata", {})
    profile = RunProfile(
        run_digest=run_digest,
        name=str(metadata.get("name")),
        title=metadata.get("title"),
        source=str(predicate.get("source")),
        external_id=predicate.get("externalId"),
        benchmark=native.get("benchmark"),
        status=str(spec.get("status")),
        comparison_key=comparison_key_of(
            manifests, primary=None if primary is NO_MEASUREMENT else primary
        ),
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
        author=old_author(manifests.get("implementation")),
        implementation_digest=spec.get("implementationDigest"),
    )
    return profile, primary


def old_fold(position: int, run_digest: str, predicate: Mapping[str, Any]) -> RunFold:
    profile, primary = old_profile(run_digest, predicate)
    manifests = predicate["manifests"]
    implementation = manifests.get("implementation")
    pinned = isinstance(implementation, MAPPINGS) and bool(
        (implementation.get("spec", {}).get("source") or {}).get("contentDigest")
    )
    facts = ingestion_facts_from_manifests(
        position,
        manifests["run"],
        manifests.get("environment") or {},
        has_pinned_source=pinned,
        primary=primary,
    )
    return RunFold(profile=profile, state=EvidenceState.start(facts), ingestion=predicate)


def old_profile_columns(fold: RunFold) -> dict[str, Any]:
    p = fold.profile
    return {
        "name": p.name,
        "title": p.title,
        "source": p.source,
        "external_id": p.external_id,
        "benchmark": p.benchmark,
        "status": p.status,
        "comparison_key": p.comparison_key,
        "metric": p.metric,
        "statistic": p.statistic,
        "unit": p.unit,
        "claimed": p.claimed,
        "product": p.product,
        "architecture": p.architecture,
        "observed_at": p.observed_at,
        "protocol_digest": p.protocol_digest,
        "environment_digest": p.environment_digest,
        "workload_digest": p.workload_digest,
        "author": p.author,
        "implementation_digest": p.implementation_digest,
    }


def old_evidence_columns(result: EvidenceResult) -> dict[str, Any]:
    return {
        "evidence_level": result.level.label,
        "evidence_order": int(result.level),
        "evidence_reasons": json.dumps(list(result.reasons)),
        "evidence_caused_by": result.caused_by,
        "policy_version": result.policy_version,
    }


def old_new_run_row(position: int, digest: str, received_at: str, predicate: Any) -> dict[str, Any]:
    fold = old_fold(position, digest, predicate)
    return {
        "run_digest": digest,
        **old_profile_columns(fold),
        "ingested_position": position,
        "ingested_at": received_at,
        "retracted": False,
        "superseded_by": None,
        "attestations": 0,
        "reruns": 0,
        "last_position": position,
        **old_evidence_columns(fold.evidence),
        "rerun_median_ns": None,
        "rerun_ci95_low": None,
        "rerun_ci95_high": None,
    }


@contextmanager
def older_road() -> Iterator[None]:
    """The views fold new runs by the older road."""
    with mock.patch.object(run_views, "new_run_row", old_new_run_row):
        yield


# --- rows of generated predicates ------------------------------------------------------------

DIGEST = "sha256:" + "12" * 32
text = st.one_of(st.none(), st.text(max_size=8), st.integers(-3, 3), st.just(DIGEST))
number = st.one_of(
    st.none(),
    st.integers(-5, 10**12),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e12),
    st.sampled_from(["1.5 ms", "20 us", "fast", "3 ns"]),
)
authors = st.one_of(
    st.none(),
    st.just("someone"),
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"name": text}),
            st.just({}),
            st.just("not a mapping"),
        ),
        max_size=3,
    ),
)
implementation = st.one_of(
    st.none(),
    st.just("not a mapping"),
    st.fixed_dictionaries(
        {},
        optional={
            "metadata": st.one_of(st.none(), st.fixed_dictionaries({"authors": authors})),
            "spec": st.fixed_dictionaries(
                {"source": st.one_of(st.none(), st.fixed_dictionaries({"contentDigest": text}))}
            ),
        },
    ),
)
# Where each drawn value goes (a path under the predicate); ``_DROP`` removes the key.
_DROP: Any = object()
edits = st.lists(
    st.one_of(
        st.tuples(st.just(("manifests", "run", "metadata", "title")), text),
        st.tuples(st.just(("manifests", "run", "metadata", "name")), text),
        st.tuples(st.just(("manifests", "run", "spec", "status")), text),
        st.tuples(st.just(("manifests", "run", "spec", "observedAt")), text),
        st.tuples(st.just(("manifests", "run", "spec", "protocolDigest")), text),
        st.tuples(st.just(("manifests", "run", "spec", "environmentDigest")), text),
        st.tuples(st.just(("manifests", "run", "spec", "workloadDigest")), text),
        st.tuples(st.just(("manifests", "run", "spec", "implementationDigest")), text),
        st.tuples(st.just(("manifests", "run", "spec", "timing", "latencyNs", "mean")), number),
        st.tuples(st.just(("manifests", "run", "spec", "timing", "primaryStatistic")), text),
        st.tuples(st.just(("manifests", "run", "spec", "timing")), st.just(_DROP)),
        st.tuples(
            st.just(("manifests", "run", "spec", "measurements")),
            st.lists(
                st.fixed_dictionaries(
                    {"metric": text, "statistic": text, "unit": text, "value": number}
                ),
                max_size=2,
            ),
        ),
        st.tuples(
            st.just(("manifests", "run", "spec", "evidence")),
            st.one_of(st.none(), st.just({"logs": ["a"]}), st.just({"rawSamples": [1]})),
        ),
        st.tuples(st.just(("manifests", "run", "spec", "sourceNative", "benchmark")), text),
        st.tuples(st.just(("manifests", "environment", "spec", "hardware", "product")), text),
        st.tuples(st.just(("manifests", "environment")), st.just(_DROP)),
        st.tuples(st.just(("manifests", "workload")), st.just(_DROP)),
        st.tuples(st.just(("manifests", "workload", "kind")), text),
        st.tuples(st.just(("manifests", "workload", "spec", "correctness")), text),
        st.tuples(st.just(("manifests", "implementation")), implementation),
        st.tuples(st.just(("source",)), text),
        st.tuples(st.just(("externalId",)), text),
    ),
    max_size=6,
)


def edited(base: dict[str, Any], changes: list[tuple[tuple[str, ...], Any]]) -> dict[str, Any]:
    predicate = copy.deepcopy(base)
    for path, value in changes:
        at = predicate
        for name in path[:-1]:
            if not isinstance(at.get(name), dict):
                at[name] = {}
            at = at[name]
        if value is _DROP:
            at.pop(path[-1], None)
        else:
            at[path[-1]] = value
    return predicate


def outcome(make: Any, *args: Any) -> tuple[str, Any]:
    try:
        row = make(*args)
    except Exception as exc:  # the refusal is what is compared
        return "refused", type(exc)
    return "row", (list(row.items()), [type(v) for v in row.values()])


PREDICATES = [
    {"source": "sol-execbench", "externalId": str(n), "manifests": manifests}
    for n, manifests in enumerate(MANIFESTS.values())
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PREDICATES), edits, st.integers(1, 10**6))
def test_new_run_rows_are_the_older_roads(
    base: dict[str, Any], changes: list[tuple[tuple[str, ...], Any]], position: int
) -> None:
    predicate = edited(base, changes)
    digest = "sha256:" + "ab" * 32
    new = outcome(new_run_row, position, digest, "2026-12-07T00:00:00Z", predicate)
    old = outcome(old_new_run_row, position, digest, "2026-12-07T00:00:00Z", predicate)
    assert new == old
    if new[0] == "row":  # and the profile columns a refold writes (``recompute_evidence``)
        fold = RunFold.ingested(position, digest, predicate)
        assert list(view_rows.profile_columns(fold).items()) == list(
            old_profile_columns(old_fold(position, digest, predicate)).items()
        )
        assert view_rows.evidence_columns(fold.evidence) == old_evidence_columns(fold.evidence)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(list(EvidenceLevel)),
            st.lists(st.text(max_size=12), max_size=3).map(tuple),
            st.integers(0, 10**9),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_evidence_columns_are_the_older_roads_at_every_level(
    results: list[tuple[EvidenceLevel, tuple[str, ...], int]],
) -> None:
    """Every level (refuted, verified, replicated... not only an ingestion's), and the same
    reasons met again at another level: the cached columns are the older road's."""
    for level, reasons, caused_by in results:
        for shown in (level, *[other for other in EvidenceLevel if other != level][:1]):
            result = EvidenceResult(shown, reasons, caused_by)
            assert view_rows.evidence_columns(result) == old_evidence_columns(result)


def test_the_profile_is_built_in_its_fields_order() -> None:
    """``run_facts._profile`` passes the fields positionally: a reordered RunProfile must
    reorder it too (the property above fails as well)."""
    assert RunProfile.__struct_fields__ == (
        "run_digest",
        "name",
        "title",
        "source",
        "external_id",
        "benchmark",
        "status",
        "comparison_key",
        "metric",
        "statistic",
        "unit",
        "claimed",
        "product",
        "architecture",
        "observed_at",
        "protocol_digest",
        "environment_digest",
        "workload_digest",
        "author",
        "implementation_digest",
    )


# --- rebuilt views ---------------------------------------------------------------------------


def view_rows_of(world: World) -> dict[str, list[tuple[Any, ...]]]:
    """Every view's rows, in key order."""
    with world.ledger.store.transaction(commit=False) as session:
        return {
            table.name.removeprefix("kernelindex_view_"): sorted(
                (tuple(row) for row in session.execute(select(table))), key=repr
            )
            for table in VIEW_TABLES
        }


def rebuilt_both_roads(world: World) -> dict[str, list[tuple[Any, ...]]]:
    runner = world.runner()
    runner.rebuild()
    new_rows, new_digests = view_rows_of(world), runner.table_digests()
    with older_road():
        runner.rebuild()
        old_rows, old_digests = view_rows_of(world), runner.table_digests()
    assert new_rows == old_rows
    assert new_digests == old_digests
    return new_rows


def worker_rows_both_roads(world: World) -> None:
    """A fold worker's task: the writer's rows (and manifests) the same either road."""
    runner = world.runner()
    last = world.count()
    count, new = runner.fold_range(0, last, set())
    with older_road():
        _, old = runner.fold_range(0, last, set())
    assert count == last
    assert new.run_rows() == old.run_rows()
    assert msgspec.msgpack.encode(new.new_rows) == msgspec.msgpack.encode(old.new_rows)
    assert new.manifest_rows == old.manifest_rows
    assert new.touched_groups == old.touched_groups


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sequences())
def test_random_sequences_rebuild_alike_by_both_roads(sequence: tuple[Any, ...]) -> None:
    scripts, first, _, _ = sequence
    with tempfile.TemporaryDirectory() as folder:
        world = World.create(f"sqlite:///{Path(folder) / 'ledger.db'}", KEYS, Clock(NOW))
        try:
            feed(world, interleave(build_steps(world, scripts), first))
            incremental = world.views()
            rows = rebuilt_both_roads(world)
            assert rows["runs"], "runs were folded"
            assert world.views() == incremental
            worker_rows_both_roads(world)
        finally:
            world.close()


@pytest.fixture
def world(db_url: str) -> Iterator[World]:
    w = World.create(db_url, KEYS, Clock(NOW))
    yield w
    w.close()


def test_fixed_sequence_rebuilds_alike_by_both_roads(world: World) -> None:
    lengths = [1 + sum(steps_of(op) for op in s) for s in FIXED_SCRIPTS]
    round_robin = [r for k in range(max(lengths)) for r, n in enumerate(lengths) if k < n]
    feed(world, interleave(build_steps(world, FIXED_SCRIPTS), round_robin))
    incremental = world.views()
    rows = rebuilt_both_roads(world)
    assert len(rows["runs"]) == len(FIXED_SCRIPTS)
    assert world.views() == incremental
    worker_rows_both_roads(world)


def test_a_benchmark_shaped_ledger_rebuilds_alike_by_both_roads(world: World) -> None:
    """The projection benchmark's runs (``bulk_ingest``: many runs sharing each group's
    workload object once parsed), on both backends."""
    bulk_ingest(world.ledger, world.keys.ingester, 0, 240, 7, batch_size=60)
    rows = rebuilt_both_roads(world)
    assert len(rows["runs"]) == 240
    worker_rows_both_roads(world)
