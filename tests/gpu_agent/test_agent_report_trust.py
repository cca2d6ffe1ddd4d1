"""The agent signs no timing a case child merely claims (issue 32, review F2).

A case child holds submitted code, and a Python solution can find the report pipe through
``/proc/self/fd`` and write a report of its own: status, samples, latency, clock names. The
agent reads that report as data and then judges it itself: it recomputes the latency from the
samples with the rule the child uses (``TimingTerms.summarize``), holds the median to the
roofline floor of the terms it sent, asks a passed case for the stop rule's sample count, and
signs only clock names of its own. A report of an agent failure made after the child said it
was ready is the case's invalid report, and none of its text is kept.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest

from domain.statements import CaseReason
from gpu_agent import stats
from gpu_agent.case_child import run_case
from gpu_agent.case_task import TimingTerms
from gpu_agent.child_process import ChildResult, in_child
from gpu_agent.harness import UNTRUSTED_AGENT_ERROR, HarnessError, child_outcome, run_job
from gpu_agent.jailed_child import parse_report
from gpu_agent.result_assembly import case_record
from tests.gpu_agent.test_agent_isolation import FAST, one_case_job

ATTACKER = "ATTACKER TEXT: visit evil.example"

# A solution that computes nothing: at import it writes a "passed" report of its own on every
# pipe it holds (the report pipe among them), with the samples and clock names it likes.
FORGE = r"""
import os, json
samples = {samples!r}
outcome = {{"status": "passed", "samples_ns": samples,
  "latency": {{"median": 1.0, "mean": 1.0, "p05": 1.0, "p95": 1.0, "minimum": 1.0,
               "maximum": 1.0, "mad": 0.0, "ci95": [1.0, 1.0]}},
  "timing_clocks_mhz": {{{attacker!r}: [1980.0], "sm": [1980.0]}},
  "max_abs_error": 0.0, "max_rel_error": 0.0, "floor_ns": 0.0, "stopped_by": "rse"}}
data = json.dumps({{"kind": "ok", "outcome": outcome}}).encode()
for fd in map(int, os.listdir("/proc/self/fd")):
    try:
        if fd > 2 and os.readlink(f"/proc/self/fd/{{fd}}").startswith("pipe:"):
            os.write(fd, len(data).to_bytes(4, "big") + data)
    except OSError:
        pass
os._exit(0)
"""

# What a forged "agent-error" says: text the agent must neither log nor treat as its own.
FORGED_AGENT_ERROR = r"""
import os, json
data = json.dumps({"kind": "agent-error", "detail": "ATTACKER TEXT: the agent is broken"})
data = data.encode()
for fd in map(int, os.listdir("/proc/self/fd")):
    try:
        if fd > 2 and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
            os.write(fd, len(data).to_bytes(4, "big") + data)
    except OSError:
        pass
os._exit(0)
"""


def test_a_forged_passed_report_with_impossible_samples_signs_below_the_floor() -> None:
    """forge_pass.py of the review: 40 samples of 1 ns and an attacker's clock name. The
    agent's own floor check makes the case an impossible time; no attacker text is signed."""
    source = FORGE.format(samples=[1.0] * 40, attacker=ATTACKER)
    result = run_job(one_case_job(source), "cpu-test", FAST)
    (case,) = result["cases"]
    assert case["status"] == "impossible_time"
    assert case["reason"] == CaseReason.BELOW_ROOFLINE_FLOOR.value
    assert case["floorNs"] > 1.0 / FAST.floor_factor  # the agent's floor, not the forged 0
    assert result["summary"]["allCorrect"] is False
    assert "ATTACKER" not in json.dumps(result)
    assert set(result["environment"].get("clocks", {})) <= {"sm.timed.min", "sm.timed.max"}


def test_a_forged_passed_report_with_too_few_samples_is_an_invalid_report() -> None:
    source = FORGE.format(samples=[1e9] * 3, attacker=ATTACKER)
    result = run_job(one_case_job(source), "cpu-test", FAST)
    assert result["cases"] == [
        {"case": "rows-2", "status": "error", "reason": CaseReason.INVALID_REPORT.value}
    ]


def test_a_forged_agent_error_after_ready_is_the_cases_invalid_report() -> None:
    """Before: the job closed as the agent's own failure, the attacker's text in its log."""
    result = run_job(one_case_job(FORGED_AGENT_ERROR), "cpu-test", FAST)
    assert result["cases"] == [
        {"case": "rows-2", "status": "error", "reason": CaseReason.INVALID_REPORT.value}
    ]


def test_a_jailed_agent_error_after_ready_is_told_apart_from_one_before() -> None:
    """A child failing after READY (here: the agent's case body given no task) reports
    ``agent-error``; the agent marks it as said after READY, when a solution could have."""
    child = in_child(run_case, None, 60, sandboxed=True)
    assert child.kind == "late-agent-error"


def test_a_late_agent_error_is_the_agents_only_where_no_submitted_code_ran_on_the_host() -> None:
    claim = ChildResult("late-agent-error", "ATTACKER TEXT: the agent is broken")
    outcome = child_outcome(claim, "c", TERMS, host_code=True)
    assert outcome.code == CaseReason.INVALID_REPORT and outcome.reason == UNTRUSTED_AGENT_ERROR
    assert case_record("c", outcome) == {
        "case": "c",
        "status": "error",
        "reason": CaseReason.INVALID_REPORT.value,
    }
    # A declarative child runs the submission on the device only: its report is the agent's.
    with pytest.raises(HarnessError, match="the agent is broken"):
        child_outcome(claim, "c", TERMS, host_code=False)


# --- the agent's reading of a report, unit by unit ----------------------------------------

TERMS = TimingTerms(
    stop=stats.StopPolicy(warmup=1, batch=10, min_samples=20, max_samples=40),
    written_bytes=64 * 1024 * 1024,
    l2_bytes=0,
    copy_bandwidth=1e12,  # floor: 64 MiB / (1.5 × 2 TB/s) ≈ 22.4 µs
    floor_factor=0.9,
    bootstrap_resamples=200,
    bootstrap_seed=7,
)
FLOOR = TERMS.floor()[0]


def reported(**fields: Any) -> ChildResult:
    """What the agent reads off the pipe: the child's JSON, parsed as the harness does."""
    outcome = {"status": "passed", "samples_ns": [FLOOR * 2] * 30, **fields}
    return ChildResult(*parse_report(json.dumps({"kind": "ok", "outcome": outcome}).encode()))


def signed(child: ChildResult) -> dict[str, Any]:
    return case_record("c", child_outcome(child, "c", TERMS, host_code=True))


def test_an_honest_report_signs_the_agents_own_summary_and_floor() -> None:
    samples = [FLOOR * 2 + i for i in range(30)]
    record = signed(reported(samples_ns=samples, stopped_by="rse"))
    assert record["status"] == "passed"
    assert record["latencyNs"] == TERMS.summarize(samples).to_json()
    assert record["samples"] == 30
    assert record["floorNs"] == FLOOR
    assert record["stoppedBy"] == "rse"


def test_the_reported_latency_is_recomputed_from_the_samples() -> None:
    lie: dict[str, Any] = {"median": 1.0, "mean": 1.0, "p05": 1.0, "p95": 1.0, "minimum": 1.0}
    lie |= {"maximum": 1.0, "mad": 0.0, "ci95": [1.0, 1.0]}
    record = signed(reported(latency=lie, floor_ns=0.0))
    assert record["latencyNs"]["median"] == FLOOR * 2
    assert record["floorNs"] == FLOOR


def test_a_passed_median_under_the_floor_is_an_impossible_time_whatever_the_child_said() -> None:
    record = signed(reported(samples_ns=[FLOOR * 0.5] * 30, floor_ns=0.0))
    assert record["status"] == "impossible_time"
    assert record["reason"] == CaseReason.BELOW_ROOFLINE_FLOOR.value
    assert record["latencyNs"]["median"] == FLOOR * 0.5
    assert record["floorNs"] == FLOOR


@pytest.mark.parametrize(
    "samples",
    [
        [],
        [FLOOR * 2] * 19,  # under the stop rule's minimum
        [FLOOR * 2] * 41,  # over its maximum
        [FLOOR * 2] * 29 + [math.nan],
        [FLOOR * 2] * 29 + [-1.0],
    ],
)
def test_a_passed_report_whose_samples_the_stop_rule_cannot_give_is_invalid(
    samples: list[float],
) -> None:
    assert signed(reported(samples_ns=samples)) == {
        "case": "c",
        "status": "error",
        "reason": CaseReason.INVALID_REPORT.value,
    }


def test_a_failed_case_keeps_its_status_with_the_agents_summary() -> None:
    child = reported(status="incorrect", code="output-mismatch", round="post-timing")
    record = signed(child)
    assert record["status"] == "incorrect"
    assert record["reason"] == "output-mismatch"
    assert record["latencyNs"] == TERMS.summarize([FLOOR * 2] * 30).to_json()


def test_a_failed_case_without_samples_signs_no_latency() -> None:
    child = reported(status="incorrect", code="output-mismatch", samples_ns=[])
    outcome = child_outcome(
        replace(child, value=replace(child.value, latency={"median": 1.0})),
        "c",
        TERMS,
        host_code=True,
    )
    assert outcome.latency is None
    assert "latencyNs" not in case_record("c", outcome)
