"""The rerun/v1 ``result``'s parts, from the cases' outcomes and the device fingerprints.

Suite latency (``summary.samplesNs``): when every case passed, sample *i* of the suite is
the sum over cases of each case's *i*-th kept sample, for i below the smallest per-case
sample count (≤ 2000 = ``MAX_RERUN_SAMPLES``). Cases are timed independently, so this is a
draw from the distribution of "one launch of every case"; ``medianNs``/``meanNs``/``ci95Ns``
are the median, mean and bootstrap CI95 of the median of those sums.
"""

from __future__ import annotations

import importlib.metadata
import platform
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from domain.statements import (
    MAX_RERUN_SAMPLES,
    RERUN_CLOCK_KEYS,
    TIMER_REFERENCES,
    CaseReason,
    CaseStatus,
    Defence,
    DefenceOutcome,
    RerunBuild,
    RoundLabel,
    StatementError,
    StopRule,
    TimerName,
    is_case_reason,
    validate_part,
)
from gpu_agent import stats
from gpu_agent.case_task import CaseOutcome, TimingTerms
from gpu_agent.python_solutions.spec import TorchSolution

# Signed words come from the rerun vocabulary (domain/statements.py), never from a case
# child: a child holds submitted code, so whatever it reports in words may be the solution's.
# The child's own words (``CaseOutcome.reason``, a defence's detail) stay in this process.

# Where a child gave no code (the declarative path's child reports agent-made words), the
# code is read from its status and the start of its reason: first match wins.
_BY_STATUS = {
    CaseStatus.TIMEOUT: CaseReason.TIMEOUT,
    CaseStatus.IMPOSSIBLE_TIME: CaseReason.BELOW_ROOFLINE_FLOOR,
}
_ERROR_WORDS = (
    ("compile failed", CaseReason.BUILD_FAILED),
    ("the case child", CaseReason.CHILD_DIED),
)
_INCORRECT_WORDS = (
    ("unwritten output", CaseReason.UNWRITTEN_OUTPUT),
    ("input mutation", CaseReason.INPUT_MUTATION),
    ("tolerance", CaseReason.OUTPUT_MISMATCH),
)
_ROUNDS = {r.value for r in RoundLabel}


def _read_code(status: CaseStatus, text: str) -> CaseReason:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    words = _ERROR_WORDS if status is CaseStatus.ERROR else _INCORRECT_WORDS
    found = [(text.find(w), code) for w, code in words if w in text]
    if found:
        return min(found)[1]
    return CaseReason.LAUNCH_FAILED if status is CaseStatus.ERROR else CaseReason.OUTPUT_MISMATCH


def _read_round(text: str) -> str | None:
    if text.startswith("last timed launch"):
        return RoundLabel.LAST_TIMED.value
    if text.startswith("round "):
        label = text.removeprefix("round ").split(" ", 1)[0].rstrip(":")
        return label if label in _ROUNDS else None
    return None


def _defence(defence: Mapping[str, Any]) -> dict[str, Any] | None:
    """A defence record in the vocabulary's terms, or None when it is not one."""
    name, outcome, runs = defence.get("name"), defence.get("outcome"), defence.get("runs")
    if name not in {d.value for d in Defence} or outcome not in {o.value for o in DefenceOutcome}:
        return None
    record: dict[str, Any] = {"name": name, "outcome": outcome}
    if isinstance(runs, int) and not isinstance(runs, bool) and 0 < runs < 2**53:
        record["checks"] = runs
    return record


_CROSS_NUMBERS = ("calls", "timedNs", "wallNs", "ratio", "otherThreadsCpuNs")


def _cross_check(check: Mapping[str, Any]) -> dict[str, Any] | None:
    if check.get("timer") not in {t.value for t in TimerName}:
        return None
    if check.get("reference") not in TIMER_REFERENCES:
        return None
    if check.get("outcome") not in {o.value for o in DefenceOutcome}:
        return None
    record = {"timer": check["timer"], "reference": check["reference"]}
    record |= {k: check[k] for k in _CROSS_NUMBERS if k in check}
    record["outcome"] = check["outcome"]
    return record


# The agent's own words for a case whose report it does not believe (never the child's).
INVALID_REPORT_REASON = "the case child's report is not one the agent's harness could make"


def invalid_report() -> CaseOutcome:
    """A case the agent signs as ``invalid-report``: nothing of the child's report kept."""
    return CaseOutcome(
        CaseStatus.ERROR.value, INVALID_REPORT_REASON, code=CaseReason.INVALID_REPORT
    )


def checked_timing(outcome: CaseOutcome, timing: TimingTerms) -> CaseOutcome:
    """``outcome`` as the agent signs it: its timing judged by the agent, not the child.

    A case child holds submitted code, which can write the report itself (a Python solution
    finds the pipe in /proc/self/fd). So the agent keeps only the samples and recomputes from
    them, with the very terms it sent, what the child computed: the latency summary
    (``timing.summarize``, the child's rule), the roofline floor and its check — a passed
    case whose median is under ``factor × floor`` is an impossible time, whatever the child
    said. A passed case needs the stop rule's sample count (``min_samples`` to
    ``max_samples``); samples the stop rule cannot give (too few or many, not finite,
    negative) make the case an ``invalid-report`` error."""
    passed = outcome.status == CaseStatus.PASSED.value
    samples = outcome.samples_ns
    if not samples:
        return invalid_report() if passed else replace(outcome, latency=None, floor_ns=None)
    stop = timing.stop
    if passed and not stop.min_samples <= len(samples) <= stop.max_samples:
        return invalid_report()
    try:
        summary = timing.summarize(samples)
    except ValueError:  # not finite, or negative: no timer gives such a sample
        return invalid_report()
    floor_ns = timing.floor()[0]
    checked = replace(
        outcome,
        latency=summary.to_json(),
        # Where the child held the case to the floor (always, for a passed one): the agent's.
        floor_ns=floor_ns if passed or outcome.floor_ns is not None else None,
    )
    if passed and timing.below_floor(summary.median, floor_ns):
        return replace(
            checked,
            status=CaseStatus.IMPOSSIBLE_TIME.value,
            reason="impossible time: the median is under the agent's roofline floor check",
            code=CaseReason.BELOW_ROOFLINE_FLOOR,
            round=None,
        )
    return checked


def _invalid(case: str) -> dict[str, Any]:
    return {"case": case, "status": "error", "reason": CaseReason.INVALID_REPORT.value}


def case_record(case: str, outcome: CaseOutcome) -> dict[str, Any]:
    """One entry of ``result.cases``: status, vocabulary code, numbers; no child's words.
    A report that does not fit the vocabulary (a tampered child) is an ``invalid-report``
    error, which refutes nothing the child could not refute by failing."""
    try:
        status = CaseStatus(outcome.status)
    except ValueError:
        return _invalid(case)
    record: dict[str, Any] = {"case": case, "status": status.value}
    if outcome.max_abs_error is not None:
        record["maxAbsError"] = outcome.max_abs_error
    if outcome.max_rel_error is not None:
        record["maxRelError"] = outcome.max_rel_error
    if outcome.latency is not None:
        record["latencyNs"] = outcome.latency
        record["samples"] = len(outcome.samples_ns)
    why = _why(status, outcome)
    checks = _checks(outcome)
    if why is None or checks is None:
        return _invalid(case)
    return record | why | checks


def _why(status: CaseStatus, outcome: CaseOutcome) -> dict[str, Any] | None:
    """The reason code, failed round, stop rule and floor; None if the code is not a word."""
    why: dict[str, Any] = {}
    text = outcome.reason or ""
    if status is not CaseStatus.PASSED:
        code = outcome.code if outcome.code is not None else _read_code(status, text)
        if not is_case_reason(code):
            return None
        why["reason"] = str(code)
        label = outcome.round if outcome.round is not None else _read_round(text)
        if label is not None and label in _ROUNDS:
            why["round"] = label
    if outcome.stopped_by in {r.value for r in StopRule}:
        why["stoppedBy"] = outcome.stopped_by
    if outcome.floor_ns is not None:
        why["floorNs"] = outcome.floor_ns
    return why


def _checks(outcome: CaseOutcome) -> dict[str, Any] | None:
    """The defences and the timer cross-check, by name; None if one is not of the vocabulary."""
    checks: dict[str, Any] = {}
    if outcome.defences is not None:
        defences = [_defence(d) for d in outcome.defences]
        if None in defences:
            return None
        checks["defences"] = defences
    if outcome.timer_cross_check is not None:
        cross = _cross_check(outcome.timer_cross_check)
        if cross is None:
            return None
        checks["timerCrossCheck"] = cross
    return checks


def job_build(outcomes: Sequence[CaseOutcome]) -> dict[str, Any] | None:
    """``result.build`` from the cases (the first that says), if it fits the vocabulary; a
    Python solution's is made by the harness instead (:func:`python_build`)."""
    build = next((o.build for o in outcomes if o.build is not None), None)
    try:
        validate_part(RerunBuild, build)
    except StatementError:
        return None
    return build


def python_build(solution: TorchSolution, device: str) -> dict[str, Any]:
    """``result.build`` of a Python solution, made in the agent from what it knows — the
    solution's parsed kind and languages, the versions installed — and never from a report
    of the child that held the solution."""
    runtime = {
        "python": platform.python_version(),
        "torch": _version("torch"),
        "numpy": _version("numpy"),
        "device": device,
        "torch-threads": "1",
    }
    return {
        "solutionKind": solution.kind,
        "language": ", ".join(solution.languages),
        "runtime": {k: v for k, v in runtime.items() if v is not None},
        "flags": [
            "destination-passing" if solution.destination_passing else "value-returning",
            "torch.no_grad",
            "torch.set_num_threads(1)",
        ],
    }


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def suite_summary(outcomes: Sequence[CaseOutcome], seed: int, resamples: int) -> dict[str, Any]:
    """``result.summary``: the suite latency when every case passed (see the module doc)."""
    all_correct = all(o.status == "passed" for o in outcomes)
    if not all_correct or not all(o.samples_ns for o in outcomes):
        return {"allCorrect": all_correct, "samples": 0}
    count = min(MAX_RERUN_SAMPLES, *(len(o.samples_ns) for o in outcomes))
    suite = [sum(o.samples_ns[i] for o in outcomes) for i in range(count)]
    low, high = stats.bootstrap_median_ci(suite, seed=seed, resamples=resamples)
    return {
        "allCorrect": True,
        # statistics.median: exactly what the predicate recomputes from samplesNs.
        "medianNs": statistics.median(suite),
        "meanNs": statistics.fmean(suite),
        "ci95Ns": [low, high],
        "samples": count,
        "samplesNs": suite,
    }


# The clocks a case child reads while timing (case_child.clocks_by_name): only these names
# are taken from its report, whatever other names it sends.
TIMED_CLOCKS = ("sm", "memory")


def timing_clocks(outcomes: Sequence[CaseOutcome]) -> dict[str, list[float]]:
    """Every clock reading taken during the cases' timed batches, by clock name."""
    merged: dict[str, list[float]] = {}
    for outcome in outcomes:
        for name in TIMED_CLOCKS:
            merged.setdefault(name, []).extend(outcome.timing_clocks_mhz.get(name, []))
    return {name: readings for name, readings in merged.items() if readings}


def environment(
    start: Mapping[str, Any],
    end: Mapping[str, Any],
    timed: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, Any]:
    """``result.environment`` from the fingerprints read before and after the cases, and the
    range of each clock read while the cases were timed (``<clock>.timed.min``/``.max``: the
    idle readings before and after cannot show a GPU that ran below its clocks meanwhile)."""
    env: dict[str, Any] = {
        "product": start["product"],
        "architecture": start["architecture"],
        "gpuUuidHash": start["gpu_uuid_hash"],
        "backend": start["backend"],
    }
    for key in ("driver", "cuda"):
        if start.get(key):
            env[key] = start[key]
    clocks = {f"{name}.start": float(v) for name, v in (start.get("clocks_mhz") or {}).items()}
    clocks |= {f"{name}.end": float(v) for name, v in (end.get("clocks_mhz") or {}).items()}
    for name, readings in (timed or {}).items():
        if readings:
            clocks[f"{name}.timed.min"] = float(min(readings))
            clocks[f"{name}.timed.max"] = float(max(readings))
    # The end fingerprint comes from a case child's report: only the vocabulary's names.
    clocks = {key: value for key, value in clocks.items() if key in RERUN_CLOCK_KEYS}
    if clocks:
        env["clocks"] = clocks
    temperature = {
        label: float(info["temperature_c"])
        for label, info in (("start", start), ("end", end))
        if info.get("temperature_c") is not None
    }
    if temperature:
        env["temperatureC"] = temperature
    return env
