"""The projected views over the SOL 056 demo cohort, on SQLite and PostgreSQL: evidence levels,
ranks and leaderboards (DESIGN.md §7–8), the agent rerun flow that alone moves a level after
ingestion, and the rerun statements the ledger refuses — which change nothing anywhere."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from projection_world import (
    B200,
    CLAIMED,
    GROUP,
    MANIFESTS,
    NAMES,
    RUN_15149,
    RUN_21613,
    RUN_36818,
    SEED,
    SM100,
    Job,
    World,
    gpu,
)

import domain.manifests.manifest_set as manifest_set
from api.service.freshness import Views
from api.service.models import to_builtins
from api.service.runs import Runs
from domain.errors import DomainError
from domain.manifests.canonical_form import manifest_digest
from domain.ranking import View
from ledger.errors import RerunJobError, WrongRoleError
from ledger.signing.authoring import attachment_envelope, ingestion_envelope
from ledger.signing.dsse import UnknownKeyError
from ledger.signing.keys import SigningKey
from ledger.store.group_index import group_of


def run_record(ledger: Any, digest: str) -> dict[str, Any]:
    """The service's record of a run (every section of its page), as the API sends it."""
    document: dict[str, Any] = to_builtins(Runs(Views(ledger)).record(digest))
    return document


REPORTED_REASONS = [
    "source marked the run passed",
    # The world's runs pin their solution (a job must be bound to it by digest).
    "pinned source: implementation artifact digest present",
    "no raw evidence (trace, logs or samples)",
]


# ------------------------------------------------------------------ the demo cohort


def test_seed_ranks_3_of_3_and_21613_is_first(cohort: World) -> None:
    assert cohort.board() == [(RUN_21613, 1, 3), (RUN_36818, 2, 3), (SEED, 3, 3)]
    record = run_record(cohort.ledger, SEED)
    native = record["standings"]["source-native"]
    assert (native["rank"], native["of"], native["value"]) == (3, 3, 1750693)
    assert native["label"] == "Rank 3 of 3 in its comparison group · source-native comparison"
    assert native["tiedWith"] == []
    assert "verified" not in record["standings"]
    assert record["comparisonKey"] == GROUP
    first = record["compareWithFirst"]
    assert first["b"] == RUN_21613
    assert first["ratio"] == pytest.approx(1750693 / 1499085)
    assert first["ratio"] == pytest.approx(1.1678, abs=1e-4)
    assert any(d["path"] == "run.metadata.name" for d in first["differences"])
    row = cohort.row(RUN_21613)
    assert (row.external_id, row.claimed, row.comparison_key) == ("21613", 1499085, GROUP)
    # 15149 is on the same workload but another protocol/environment: a group of its own.
    assert cohort.row(RUN_15149).comparison_key != GROUP
    assert cohort.standing(RUN_15149) == (1, 1)
    # Nobody reran anything: the verified view is empty.
    assert cohort.board(View.VERIFIED) == []


def test_every_ingested_run_is_reported_with_reasons_and_its_ingestion_as_cause(
    cohort: World,
) -> None:
    positions = {}
    for run in NAMES:
        records = cohort.ledger.stored_records(cohort.ledger.run(run).id, version=1)  # type: ignore[union-attr]
        positions[run] = records[0].position
    for run in NAMES:
        row = cohort.row(run)
        assert row.evidence_level == "reported"
        assert row.evidence_reasons == REPORTED_REASONS
        assert row.evidence_caused_by == positions[run]
        assert row.policy_version == "evidence-v2"
    evidence = run_record(cohort.ledger, SEED)["evidence"]
    assert evidence == {
        "level": "reported",
        "reasons": REPORTED_REASONS,
        "causedBy": positions[SEED],
        "policyVersion": "evidence-v2",
    }


def test_attestations_do_not_move_levels_or_ranks(cohort: World) -> None:
    before = cohort.views()
    level = cohort.row(SEED)
    for i, type_ in enumerate(["reproduced", "could_not_reproduce", "regression_observed"]):
        cohort.append(cohort.attest_envelope(SEED, f"attestation {i}", type_))
    after = cohort.row(SEED)
    assert after.attestations == 3
    for column in ("evidence_level", "evidence_reasons", "evidence_caused_by"):
        assert getattr(after, column) == getattr(level, column)
    assert cohort.views()["kernelindex_view_ranks"] == before["kernelindex_view_ranks"]


def test_retracting_first_reranks_and_keeps_its_level(cohort: World) -> None:
    before = cohort.row(RUN_21613)
    cohort.append(cohort.lifecycle_envelope(RUN_21613, "retract"))
    assert cohort.board() == [(RUN_36818, 1, 2), (SEED, 2, 2)]
    assert cohort.standing(SEED) == (2, 2)
    assert cohort.standing(RUN_21613) is None
    after = cohort.row(RUN_21613)
    assert after.retracted is True
    for column in ("evidence_level", "evidence_reasons", "evidence_caused_by"):
        assert getattr(after, column) == getattr(before, column)
    record = run_record(cohort.ledger, SEED)
    assert record["standings"]["source-native"]["label"].startswith("Rank 2 of 2 ")
    assert record["compareWithFirst"]["b"] == RUN_36818
    # Superseding the new #1 leaves the seed alone at the top; levels stay put.
    cohort.append(cohort.lifecycle_envelope(RUN_36818, "supersede", superseded_by=SEED))
    assert cohort.board() == [(SEED, 1, 1)]
    assert cohort.row(RUN_36818).superseded_by == SEED
    assert cohort.level(RUN_36818) == "reported"
    assert "compareWithFirst" not in run_record(cohort.ledger, SEED)


# ------------------------------------------------------------------ agent reruns


def test_agent_reruns_verify_replicate_and_refute(cohort: World) -> None:
    agent0, agent1 = cohort.keys.agents
    job = cohort.request_rerun(SEED, product=B200, architecture=SM100)
    assert cohort.level(SEED) == "reported", "a rerun request alone moves nothing"
    # A correct rerun within 1.10 × the claim: verified, and ranked in the verified view.
    receipt = cohort.append(cohort.result_envelope(job, agent0, ns=1.09 * CLAIMED[SEED]))
    assert receipt.event == "Run.RerunRecorded"
    row = cohort.row(SEED)
    assert row.evidence_level == "verified"
    assert row.evidence_caused_by == receipt.position
    assert row.evidence_reasons[0].startswith("1 accepted rerun(s) on NVIDIA B200 (sm_100)")
    assert row.rerun_median_ns == pytest.approx(1.09 * CLAIMED[SEED])
    low, median, high = row.rerun_ci95_low, row.rerun_median_ns, row.rerun_ci95_high
    assert low is not None and median is not None and high is not None
    assert low <= median <= high
    assert cohort.board(View.VERIFIED) == [(SEED, 1, 1)]
    assert cohort.standing(SEED) == (3, 3), "the source-native view is unchanged"
    record = run_record(cohort.ledger, SEED)
    assert record["standings"]["verified"]["label"] == (
        "Rank 1 of 1 in its comparison group · verified comparison"
    )
    # The same agent on a second GPU is not a replication.
    cohort.append(cohort.result_envelope(cohort.request_rerun(SEED), agent0, gpu_hash=gpu(2)))
    assert cohort.level(SEED) == "verified"
    # A second agent key on another GPU: replicated.
    receipt = cohort.append(
        cohort.result_envelope(cohort.request_rerun(SEED), agent1, gpu_hash=gpu(3))
    )
    row = cohort.row(SEED)
    assert row.evidence_level == "replicated"
    assert row.evidence_caused_by == receipt.position
    assert "distinct agent keys on distinct GPUs" in row.evidence_reasons[1]
    assert cohort.board(View.VERIFIED) == [(SEED, 1, 1)]
    # A rerun that fails correctness: refuted, and gone from the verified view.
    receipt = cohort.append(
        cohort.result_envelope(cohort.request_rerun(SEED), agent1, correct=False)
    )
    row = cohort.row(SEED)
    assert row.evidence_level == "refuted"
    assert row.evidence_caused_by == receipt.position
    assert "failed correctness" in row.evidence_reasons[0]
    assert cohort.board(View.VERIFIED) == []
    assert cohort.standing(SEED) == (3, 3), "refuted runs keep their source-native rank"
    assert row.reruns == 4


def test_a_too_slow_rerun_leaves_the_level_unchanged(cohort: World) -> None:
    # From reported: still reported, with the reason said.
    slow = cohort.request_rerun(RUN_36818)
    cohort.append(cohort.result_envelope(slow, ns=1.2 * CLAIMED[RUN_36818]))
    row = cohort.row(RUN_36818)
    assert row.evidence_level == "reported"
    assert row.evidence_reasons[:3] == REPORTED_REASONS
    assert "too slow" in row.evidence_reasons[-1]
    # From verified: still verified, caused by the same (verifying) event.
    receipt = cohort.append(cohort.result_envelope(cohort.request_rerun(SEED)))
    verified = cohort.row(SEED)
    assert verified.evidence_level == "verified"
    cohort.append(cohort.result_envelope(cohort.request_rerun(SEED), ns=2 * CLAIMED[SEED]))
    after = cohort.row(SEED)
    assert after.evidence_level == "verified"
    assert after.evidence_caused_by == receipt.position
    assert after.rerun_median_ns == verified.rerun_median_ns, "slow samples are not pooled"
    assert cohort.board(View.VERIFIED) == [(SEED, 1, 1)]


def test_verified_view_ranks_by_rerun_median(cohort: World) -> None:
    # 21613 is #1 by its claim but reruns slower than the seed's rerun: the verified view
    # ranks by what was measured.
    cohort.append(cohort.result_envelope(cohort.request_rerun(SEED), ns=1_700_000))
    cohort.append(cohort.result_envelope(cohort.request_rerun(RUN_21613), ns=1_640_000))
    cohort.append(cohort.result_envelope(cohort.request_rerun(RUN_36818), ns=1_500_000))
    assert cohort.board(View.VERIFIED) == [(RUN_36818, 1, 3), (RUN_21613, 2, 3), (SEED, 3, 3)]
    assert cohort.board() == [(RUN_21613, 1, 3), (RUN_36818, 2, 3), (SEED, 3, 3)]


def test_a_rerun_on_other_hardware_that_the_ledger_accepts_moves_nothing(cohort: World) -> None:
    """An admin may ask for a rerun on other hardware; its result is stored, but a rerun is
    evidence only on the run's own product and architecture."""
    before = cohort.views()
    level = cohort.row(SEED)
    for correct in (True, False):
        job = cohort.request_rerun(SEED, product="NVIDIA H100", architecture="sm_90")
        receipt = cohort.append(cohort.result_envelope(job, correct=correct))
        assert receipt.event == "Run.RerunRecorded"
    after = cohort.row(SEED)
    assert after.reruns == 2
    for column in ("evidence_level", "evidence_reasons", "evidence_caused_by", "rerun_median_ns"):
        assert getattr(after, column) == getattr(level, column)
    assert cohort.views()["kernelindex_view_ranks"] == before["kernelindex_view_ranks"]
    assert cohort.board(View.VERIFIED) == []


# ------------------------------------------------------------------ refusals change nothing


@dataclass(frozen=True)
class Refusal:
    make: Callable[[World, Job], dict[str, Any]]
    error: type[DomainError]
    words: str


def _signed_by(role: str) -> Callable[[World, Job], dict[str, Any]]:
    return lambda w, job: w.result_envelope(job, getattr(w.keys, role))


def _expired(w: World, job: Job) -> dict[str, Any]:
    w.clock.advance(hours=2)
    return w.result_envelope(job)


def _replayed(w: World, job: Job) -> dict[str, Any]:
    w.append(w.result_envelope(job))
    return w.result_envelope(job, gpu_hash=gpu(9), ns=CLAIMED[SEED])


def _other_runs_job(w: World, job: Job) -> dict[str, Any]:
    return w.result_envelope(Job(RUN_21613, job.job_id, job.nonce, B200, SM100))


REFUSALS = {
    "attester-signed": Refusal(_signed_by("attester"), WrongRoleError, "needs agent"),
    "ingester-signed": Refusal(_signed_by("ingester"), WrongRoleError, "needs agent"),
    "admin-signed": Refusal(_signed_by("admin"), WrongRoleError, "needs agent"),
    "unregistered-key": Refusal(
        lambda w, job: w.result_envelope(job, SigningKey.generate()),
        UnknownKeyError,
        "registered key",
    ),
    "other-architecture": Refusal(
        lambda w, job: w.result_envelope(job, architecture="sm_90"), RerunJobError, "requires"
    ),
    "other-product": Refusal(
        lambda w, job: w.result_envelope(job, product="NVIDIA H100"), RerunJobError, "requires"
    ),
    "wrong-nonce": Refusal(
        lambda w, job: w.result_envelope(job, nonce="f" * 64), RerunJobError, "nonce"
    ),
    "expired-job": Refusal(_expired, RerunJobError, "expired"),
    "replayed-result": Refusal(_replayed, RerunJobError, "already has its result"),
    "never-requested": Refusal(
        lambda w, job: w.result_envelope(job, job_id="00000000-0000-4000-8000-000000000000"),
        RerunJobError,
        "no rerun job",
    ),
    "job-of-another-run": Refusal(_other_runs_job, RerunJobError, "no rerun job"),
}


@pytest.mark.parametrize("case", list(REFUSALS), ids=list(REFUSALS))
def test_a_refused_rerun_changes_nothing(cohort: World, case: str) -> None:
    refusal = REFUSALS[case]
    job = cohort.request_rerun(SEED)
    envelope = refusal.make(cohort, job)
    count, views, row = cohort.count(), cohort.views(), cohort.row(SEED)
    with pytest.raises(refusal.error) as info:
        cohort.append(envelope)
    assert refusal.words in info.value.message
    assert cohort.count() == count, "a refused rerun must store nothing"
    runner = cohort.runner()
    assert runner.catch_up().events == 0
    assert runner.table_digests() == views
    assert cohort.row(SEED) == row
    assert cohort.board(View.VERIFIED) == ([(SEED, 1, 1)] if case == "replayed-result" else [])


def test_a_resent_result_envelope_is_a_duplicate_and_changes_nothing(cohort: World) -> None:
    envelope = cohort.result_envelope(cohort.request_rerun(SEED))
    first = cohort.append(envelope)
    count, views = cohort.count(), cohort.views()
    again = cohort.append(json.loads(json.dumps(envelope)))
    assert again.duplicate and again.position == first.position
    assert cohort.count() == count
    assert cohort.views() == views
    assert cohort.row(SEED).reruns == 1


def test_a_refused_result_leaves_its_job_open(cohort: World) -> None:
    job = cohort.request_rerun(SEED)
    for bad in (
        cohort.result_envelope(job, cohort.keys.attester),
        cohort.result_envelope(job, architecture="sm_90"),
        cohort.result_envelope(job, nonce="0" * 64),
    ):
        with pytest.raises(DomainError):
            cohort.append(bad)
    cohort.append(cohort.result_envelope(job))
    assert cohort.level(SEED) == "verified"


def test_a_rerun_result_with_a_reversed_interval_cannot_wedge_the_views(cohort: World) -> None:
    cohort.views()
    job = cohort.request_rerun(SEED)
    envelope = cohort.result_envelope(job, ci95=[1_900_000.0, 1_700_000.0])
    count = cohort.count()
    with pytest.raises(DomainError, match="ci95Ns"):
        cohort.append(envelope)
    assert cohort.count() == count
    cohort.runner().catch_up()
    assert cohort.level(SEED) == "reported"


def test_a_run_admitted_before_its_claim_had_to_read_as_one_value_stops_no_view(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Admission now refuses a run whose primary statistic names no single value (a pair);
    a ledger that admitted one before must still fold and show it: no claim, no group, the
    runs after it, an attachment to it, its page; catch-up and rebuild alike. It used to
    stop every fold, and a rebuild left the views empty (found by an attack review)."""
    poisoned = copy.deepcopy(MANIFESTS[SEED])
    poisoned["run"]["spec"]["timing"] = {
        "primaryStatistic": "confidence95",
        "latencyNs": {"mean": 1750693, "confidence95": [1700000, 1800000]},
    }
    workload = poisoned.pop("workload")  # attached later: the fold re-reads the set then
    world.ingest(RUN_21613)
    world.views()
    with monkeypatch.context() as before_the_rule:
        before_the_rule.setattr(manifest_set, "primary_measurement", lambda run: None)
        legacy = world.append(
            ingestion_envelope(poisoned, world.keys.ingester, now=world.clock.now)
        ).subject_digest
    world.views()
    name = poisoned["run"]["metadata"]["name"]
    world.append(attachment_envelope(legacy, name, {"workload": workload}, world.keys.ingester))
    world.ingest(RUN_36818)
    incremental = world.views()  # catch-up folds past it
    row = world.row(legacy)
    assert row.claimed is None and row.comparison_key is None
    world.row(RUN_36818)
    page = run_record(world.ledger, legacy)
    assert page["identity"]["runDigest"] == legacy and page["identity"]["name"] == name
    rebuilt = world.runner()
    rebuilt.rebuild()
    assert rebuilt.table_digests() == incremental


_BIG_TOLERANCE = {
    "apiVersion": "kernelindex.dev/v1alpha1",
    "kind": "WorkloadCase",
    "metadata": {"name": "big-tolerance-case"},
    "spec": {
        "operationSpecDigest": "sha256:" + "ab" * 32,
        "axes": {"n": 1},
        "tensors": {"x": {"shape": [1], "dtype": "float32"}},
        "scalars": {"eps": {"dtype": "float32", "value": 1e20}},
        # A float canonical JSON writes as the integer literal 100000000000000000000.
        "correctness": {"comparator": "allclose", "maxAbsoluteError": 1e20},
    },
}


def _run_with(world: World, name: str, mean: int, workload: dict[str, Any] | None) -> str:
    manifests = copy.deepcopy(MANIFESTS[SEED])
    del manifests["workload"]
    manifests["run"]["metadata"]["name"] = name
    manifests["run"]["spec"]["workloadDigest"] = manifest_digest(_BIG_TOLERANCE)
    manifests["run"]["spec"]["timing"]["latencyNs"]["mean"] = mean
    if workload is not None:
        manifests["workload"] = workload
    envelope = ingestion_envelope(manifests, world.keys.ingester, now=world.clock.now)
    return world.append(envelope).subject_digest


def test_a_float_written_as_a_long_integer_folds_as_admission_read_it(world: World) -> None:
    """Canonical JSON writes 1e20 as 100000000000000000000. Admission reads that as the
    float it is; the views read stored payloads with msgspec, which made it an int that
    canonical JSON refuses: one honest attachment stopped every catch-up and rebuild, and
    inline it dropped its runs from every leaderboard (found by an attack review). Now the
    views read what admission read: the groups are the ledger's, catch-up equals rebuild."""
    world.ingest(RUN_21613)
    attached = _run_with(world, "attached-later", 1000, None)
    world.views()
    world.append(
        attachment_envelope(
            attached, "attached-later", {"workload": _BIG_TOLERANCE}, world.keys.ingester
        )
    )
    inline = [_run_with(world, f"inline-{i}", 2000 + i, _BIG_TOLERANCE) for i in range(2)]
    world.ingest(RUN_36818)  # an honest run after them
    incremental = world.views()
    with world.ledger.store.transaction(commit=False) as session:
        for run in (attached, *inline):
            key = world.row(run).comparison_key
            assert key is not None and key == group_of(session, run)
    world.row(RUN_36818)
    assert {r for r, _, _ in world.board(key=str(world.row(attached).comparison_key))} == {
        attached,
        *inline,
    }
    rebuilt = world.runner()
    rebuilt.rebuild()
    assert rebuilt.table_digests() == incremental
