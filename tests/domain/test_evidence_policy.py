"""Evidence policy (DESIGN.md §7): the rules on examples, corner cases, and hypothesis
properties against an independent statement of the rules."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from domain.evidence import (
    POLICY_VERSION,
    AttestationFacts,
    EvidenceLevel,
    EvidencePolicyError,
    EvidenceResult,
    EvidenceState,
    IngestionFacts,
    LifecycleFacts,
    ReportFacts,
    RerunFacts,
    RerunRequestFacts,
    RunEvent,
    evaluate_evidence,
    ingestion_facts_from_manifests,
)

L = EvidenceLevel
B200, SM100 = "NVIDIA B200", "sm_100"


def ingestion(**changes: Any) -> IngestionFacts:
    base = IngestionFacts(
        position=1,
        status="passed",
        has_pinned_source=True,
        has_raw_evidence=True,
        product=B200,
        architecture=SM100,
        primary_statistic="mean",
        claimed_ns=1000,
    )
    return replace(base, **changes)


def rerun(position: int, **changes: Any) -> RerunFacts:
    base = RerunFacts(
        position=position,
        agent_key_id="sha256:" + "a" * 64,
        gpu_uuid_hash="gpu-1",
        product=B200,
        architecture=SM100,
        all_cases_correct=True,
        median_ns=1050,
        ci95_ns=(1000, 1100),
        accepted=True,
    )
    return replace(base, **changes)


def level(*events: RunEvent) -> EvidenceLevel:
    return evaluate_evidence(events).level


# --- ingestion ------------------------------------------------------------------------------------


def test_order_of_levels() -> None:
    assert L.REFUTED < L.REPORTED < L.REPRODUCIBLE < L.VERIFIED < L.REPLICATED
    assert [str(x) for x in L] == ["refuted", "reported", "reproducible", "verified", "replicated"]
    assert L.parse("verified") is L.VERIFIED
    with pytest.raises(EvidencePolicyError, match="one of refuted"):
        L.parse("gold")


def test_initial_levels() -> None:
    assert level(ingestion()) is L.REPRODUCIBLE
    assert level(ingestion(has_pinned_source=False)) is L.REPORTED
    assert level(ingestion(has_raw_evidence=False)) is L.REPORTED
    result = evaluate_evidence([ingestion(position=7, has_raw_evidence=False)])
    assert result.caused_by == 7
    assert result.policy_version == POLICY_VERSION
    assert any("no raw evidence" in reason for reason in result.reasons)
    assert result.as_json()["level"] == "reported"


def test_a_failed_source_status_is_reported_and_frozen() -> None:
    failed = ingestion(status="runtime_error")
    result = evaluate_evidence([failed])
    assert result.level is L.REPORTED
    assert "not 'passed'" in result.reasons[0]
    for events in (
        [rerun(2)],
        [rerun(2, all_cases_correct=False)],
        [rerun(2, agent_key_id="k2", gpu_uuid_hash="g2"), rerun(3)],
    ):
        assert evaluate_evidence([failed, *events]) == result


# --- reruns ---------------------------------------------------------------------------------------


def test_one_matching_rerun_within_tolerance_verifies() -> None:
    result = evaluate_evidence([ingestion(has_raw_evidence=False), rerun(5)])
    assert result.level is L.VERIFIED
    assert result.caused_by == 5
    assert "1 accepted rerun(s) on NVIDIA B200 (sm_100)" in result.reasons[0]


def test_tolerance_boundary_is_inclusive_and_exact() -> None:
    assert level(ingestion(), rerun(2, median_ns=1100)) is L.VERIFIED  # exactly 1.10 × 1000
    assert level(ingestion(), rerun(2, median_ns=1100.0000001)) is L.REPRODUCIBLE
    assert level(ingestion(claimed_ns=3), rerun(2, median_ns=3.3)) is L.VERIFIED
    assert level(ingestion(tolerance=1.0), rerun(2, median_ns=1000)) is L.VERIFIED
    assert level(ingestion(tolerance=1.0), rerun(2, median_ns=1001)) is L.REPRODUCIBLE
    assert level(ingestion(), rerun(2, median_ns=10)) is L.VERIFIED  # faster is fine


def test_the_claims_statistic_is_compared_when_the_rerun_reports_it() -> None:
    slow_mean = rerun(2, median_ns=1000, mean_ns=1200)
    assert level(ingestion(primary_statistic="mean"), slow_mean) is L.REPRODUCIBLE
    assert level(ingestion(primary_statistic="median"), slow_mean) is L.VERIFIED
    assert level(ingestion(primary_statistic="p95"), slow_mean) is L.VERIFIED  # median fallback


def test_correct_but_too_slow_neither_verifies_nor_refutes() -> None:
    result = evaluate_evidence([ingestion(), rerun(2, median_ns=2000)])
    assert result.level is L.REPRODUCIBLE
    assert result.caused_by == 1  # the level never changed
    assert "too slow: mean" not in result.reasons[-1]
    assert "too slow: median 2000 ns > 1.1 × claimed 1000 ns" in result.reasons[-1]


def test_a_claim_without_latency_can_be_refuted_but_not_verified() -> None:
    score = ingestion(claimed_ns=None, primary_statistic="geomean")
    assert level(score, rerun(2)) is L.REPRODUCIBLE
    assert level(score, rerun(2, all_cases_correct=False)) is L.REFUTED


def test_replication_needs_distinct_agents_and_distinct_gpus() -> None:
    a1g1 = rerun(2)
    assert level(ingestion(), a1g1, rerun(3)) is L.VERIFIED  # same agent, same GPU
    assert level(ingestion(), a1g1, rerun(3, gpu_uuid_hash="gpu-2")) is L.VERIFIED
    assert level(ingestion(), a1g1, rerun(3, agent_key_id="k2")) is L.VERIFIED
    result = evaluate_evidence(
        [ingestion(), a1g1, rerun(3, agent_key_id="k2", gpu_uuid_hash="gpu-2")]
    )
    assert result.level is L.REPLICATED
    assert result.caused_by == 3
    # A slow second rerun does not replicate.
    assert (
        level(ingestion(), a1g1, rerun(3, agent_key_id="k2", gpu_uuid_hash="g2", median_ns=5000))
        is L.VERIFIED
    )
    # Pairs need not be adjacent: (1, gpu-1) … (1, gpu-2) … (2, gpu-1) → 2nd and 3rd pair up.
    events: list[RunEvent] = [
        ingestion(),
        a1g1,
        rerun(3, gpu_uuid_hash="gpu-2"),
        rerun(4, agent_key_id="k2"),
    ]
    result = evaluate_evidence(events)
    assert result.level is L.REPLICATED
    assert "positions 3 and 4" in result.reasons[1]


def test_latest_failure_refutes_and_resets() -> None:
    ok, ok2 = rerun(2), rerun(3, agent_key_id="k2", gpu_uuid_hash="gpu-2")
    bad = rerun(4, all_cases_correct=False, median_ns=None, ci95_ns=None)
    result = evaluate_evidence([ingestion(), ok, ok2, bad])
    assert result.level is L.REFUTED and result.caused_by == 4
    # A later correct rerun lifts the refutation; only reruns after the failure count.
    assert level(ingestion(), ok, ok2, bad, rerun(5)) is L.VERIFIED
    back = evaluate_evidence([ingestion(), ok, ok2, bad, rerun(5, median_ns=9000)])
    assert back.level is L.REPRODUCIBLE and back.caused_by == 5
    # Refuted stays refuted while the latest rerun fails; the cause is the first failure.
    again = evaluate_evidence([ingestion(), bad, rerun(6, all_cases_correct=False)])
    assert again.level is L.REFUTED and again.caused_by == 4
    assert "position 6" in again.reasons[0]


def test_reruns_elsewhere_or_not_accepted_change_nothing() -> None:
    base = evaluate_evidence([ingestion()])
    for other in (
        rerun(2, architecture="sm_90"),
        rerun(2, product="NVIDIA H100"),
        rerun(2, accepted=False),
        rerun(2, all_cases_correct=False, accepted=False),
        rerun(2, all_cases_correct=False, architecture="gfx942"),
    ):
        assert evaluate_evidence([ingestion(), other]) == base
    unknown = ingestion(architecture=None)
    assert evaluate_evidence([unknown, rerun(2)]).level is L.REPRODUCIBLE


def test_histories_that_cannot_be_evaluated() -> None:
    with pytest.raises(EvidencePolicyError, match="exactly one ingestion"):
        evaluate_evidence([rerun(2)])
    with pytest.raises(EvidencePolicyError, match="exactly one ingestion"):
        evaluate_evidence([ingestion(), ingestion(position=2)])
    with pytest.raises(EvidencePolicyError, match="precedes the ingestion"):
        evaluate_evidence([ingestion(position=5), rerun(2)])
    with pytest.raises(EvidencePolicyError, match="share a position"):
        evaluate_evidence([ingestion(), rerun(2), AttestationFacts(2, "note")])
    state = EvidenceState.start(ingestion()).apply(rerun(3))
    with pytest.raises(EvidencePolicyError, match="ledger order"):
        state.apply(rerun(2))
    with pytest.raises(EvidencePolicyError, match="ingested once"):
        state.apply(ingestion(position=9))
    with pytest.raises(EvidencePolicyError, match="finite positive"):
        ingestion(claimed_ns=0)
    with pytest.raises(EvidencePolicyError, match="ci95"):
        rerun(2, ci95_ns=(5, 1))


def test_ingestion_facts_from_the_seed_manifests(seed_path: Path) -> None:
    seed: dict[str, Any] = json.loads(seed_path.read_text("utf-8"))
    facts = ingestion_facts_from_manifests(
        1, seed["run"], seed["environment"], has_pinned_source=True
    )
    assert (facts.status, facts.product, facts.architecture) == ("passed", B200, SM100)
    assert (facts.primary_statistic, facts.claimed_ns) == ("mean", 1750693)
    assert not facts.has_raw_evidence
    assert evaluate_evidence([facts]).level is L.REPORTED  # "marked passed by the source"
    with_logs = copy.deepcopy(seed["run"])
    with_logs["spec"]["evidence"] = {"logs": {"uri": "x", "digest": "sha256:" + "0" * 64}}
    facts = ingestion_facts_from_manifests(
        1, with_logs, seed["environment"], has_pinned_source=True
    )
    assert evaluate_evidence([facts]).level is L.REPRODUCIBLE


# --- properties -----------------------------------------------------------------------------------

AGENTS = ("k1", "k2", "k3")
GPUS = ("g1", "g2", "g3")
HARDWARE = ((B200, SM100), (B200, "sm_90"), ("NVIDIA H100", SM100), ("NVIDIA H100", "sm_90"))


@st.composite
def ingestions(draw: st.DrawFn) -> IngestionFacts:
    return IngestionFacts(
        position=0,
        status=draw(st.sampled_from(["passed", "passed", "passed", "runtime_error"])),
        has_pinned_source=draw(st.booleans()),
        has_raw_evidence=draw(st.booleans()),
        product=B200,
        architecture=SM100,
        primary_statistic=draw(st.sampled_from(["mean", "median"])),
        claimed_ns=draw(st.one_of(st.none(), st.integers(800, 2000), st.integers(800, 2000))),
        tolerance=draw(st.sampled_from([1.0, 1.1, 1.5])),
    )


@st.composite
def reruns(draw: st.DrawFn, position: int) -> RerunFacts:
    product, architecture = draw(st.sampled_from((HARDWARE[0],) * 3 + HARDWARE))
    correct = draw(st.sampled_from([True, True, True, False]))
    median = draw(st.integers(100, 2500)) if correct or draw(st.booleans()) else None
    return RerunFacts(
        position=position,
        agent_key_id=draw(st.sampled_from(AGENTS)),
        gpu_uuid_hash=draw(st.sampled_from(GPUS)),
        product=product,
        architecture=architecture,
        all_cases_correct=correct,
        median_ns=median,
        ci95_ns=None if median is None else (median * 0.9, median * 1.1),
        accepted=draw(st.sampled_from([True, True, True, False])),
        mean_ns=draw(st.one_of(st.none(), st.integers(100, 2500))),
    )


def noise(position: int) -> st.SearchStrategy[RunEvent]:
    return st.one_of(
        st.builds(
            AttestationFacts,
            st.just(position),
            st.sampled_from(
                ["reproduced", "could_not_reproduce", "environment_note", "regression_observed"]
            ),
            st.one_of(st.none(), st.integers(1, 10_000)),
        ),
        st.builds(ReportFacts, st.just(position), st.text(max_size=10)),
        st.builds(
            RerunRequestFacts,
            st.just(position),
            st.text(max_size=5),
            st.just(B200),
            st.sampled_from([SM100, "sm_90"]),
        ),
        st.builds(LifecycleFacts, st.just(position), st.sampled_from(["retract", "supersede"])),
    )


@st.composite
def histories(draw: st.DrawFn) -> tuple[IngestionFacts, list[RerunFacts]]:
    count = draw(st.integers(0, 7))
    # Reruns sit at positions 10, 20, …; other events may be put between them.
    return draw(ingestions()), [draw(reruns(10 * (i + 1))) for i in range(count)]


def oracle(first: IngestionFacts, events: list[RerunFacts]) -> EvidenceLevel:
    """DESIGN.md §7 restated independently, as a function of the whole history."""
    if first.status != "passed":
        initial = L.REPORTED
        return initial
    initial = L.REPRODUCIBLE if first.has_pinned_source and first.has_raw_evidence else L.REPORTED
    matching = [
        r
        for r in sorted(events, key=lambda r: r.position)
        if r.accepted and (r.product, r.architecture) == (first.product, first.architecture)
    ]
    if not matching:
        return initial
    if not matching[-1].all_cases_correct:
        return L.REFUTED
    failures = [i for i, r in enumerate(matching) if not r.all_cases_correct]
    since = matching[failures[-1] + 1 :] if failures else matching

    def measured(r: RerunFacts) -> float | None:
        if first.primary_statistic == "mean" and r.mean_ns is not None:
            return r.mean_ns
        return r.median_ns

    good = [
        r
        for r in since
        if first.claimed_ns is not None
        and measured(r) is not None
        and measured(r) <= first.tolerance * first.claimed_ns + 1e-9  # type: ignore[operator]
    ]
    if any(
        a.agent_key_id != b.agent_key_id and a.gpu_uuid_hash != b.gpu_uuid_hash
        for a in good
        for b in good
    ):
        return L.REPLICATED
    return L.VERIFIED if good else initial


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MIXED = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(histories())
def test_level_matches_the_rules_restated(history: tuple[IngestionFacts, list[RerunFacts]]) -> None:
    first, events = history
    assert evaluate_evidence([first, *events]).level is oracle(first, events)


@MIXED
@given(histories(), st.data())
def test_other_events_never_change_the_result(
    history: tuple[IngestionFacts, list[RerunFacts]], data: st.DataObject
) -> None:
    """Any interleaving of attestations, reports, rerun requests and lifecycle events."""
    first, events = history
    limit = 10 * (len(events) + 1) + 10
    slots = data.draw(
        st.lists(st.integers(1, limit).filter(lambda p: p % 10 != 0), unique=True, max_size=12)
    )
    others = [data.draw(noise(position)) for position in slots]
    plain = evaluate_evidence([first, *events])
    mixed = evaluate_evidence([first, *events, *others])
    assert mixed == plain  # level, reasons and cause alike
    shuffled = data.draw(st.permutations([first, *events, *others]))
    assert evaluate_evidence(shuffled) == plain  # input order is irrelevant; positions rule


@MIXED
@given(histories(), st.data())
def test_reruns_elsewhere_or_not_accepted_never_change_the_result(
    history: tuple[IngestionFacts, list[RerunFacts]], data: st.DataObject
) -> None:
    first, events = history
    kept = [
        r
        for r in events
        if r.accepted and (r.product, r.architecture) == (first.product, first.architecture)
    ]
    extra = [
        replace(data.draw(reruns(10 * (len(events) + 1) + 5 + i)), accepted=False)
        for i in range(data.draw(st.integers(0, 2)))
    ]
    assert evaluate_evidence([first, *events, *extra]) == evaluate_evidence([first, *kept])


@MIXED
@given(histories(), st.data())
def test_only_accepted_matching_reruns_move_the_level(
    history: tuple[IngestionFacts, list[RerunFacts]], data: st.DataObject
) -> None:
    first, events = history
    slots = data.draw(
        st.lists(st.integers(1, 100).filter(lambda p: p % 10 != 0), unique=True, max_size=8)
    )
    everything = sorted(
        [*events, *(data.draw(noise(p)) for p in slots)], key=lambda event: event.position
    )
    state = EvidenceState.start(first)
    before: EvidenceResult = state.result
    for event in everything:
        state = state.apply(event)
        if state.result.level != before.level:
            assert isinstance(event, RerunFacts)
            assert event.accepted
            assert (event.product, event.architecture) == (B200, SM100)
            assert first.status == "passed"
            assert state.result.caused_by == event.position
        else:
            assert state.result.caused_by == before.caused_by
        before = state.result
    assert state.result == evaluate_evidence([first, *everything])
    assert state.result.policy_version == POLICY_VERSION
