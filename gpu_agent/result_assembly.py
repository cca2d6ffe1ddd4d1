"""The rerun/v1 ``result``'s parts, from the cases' outcomes and the device fingerprints.

Suite latency (``summary.samplesNs``): when every case passed, sample *i* of the suite is
the sum over cases of each case's *i*-th kept sample, for i below the smallest per-case
sample count (≤ 2000 = ``MAX_RERUN_SAMPLES``). Cases are timed independently, so this is a
draw from the distribution of "one launch of every case"; ``medianNs``/``meanNs``/``ci95Ns``
are the median, mean and bootstrap CI95 of the median of those sums.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from domain.statements import MAX_RERUN_SAMPLES
from gpu_agent import stats
from gpu_agent.case_task import CaseOutcome

MAX_REASON = 2_000


def clip(text: str) -> str:
    """``text`` cut to at most MAX_REASON characters."""
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def case_record(case: str, outcome: CaseOutcome) -> dict[str, Any]:
    """One entry of ``result.cases``."""
    record: dict[str, Any] = {"case": case, "status": outcome.status}
    if outcome.max_abs_error is not None:
        record["maxAbsError"] = outcome.max_abs_error
    if outcome.max_rel_error is not None:
        record["maxRelError"] = outcome.max_rel_error
    if outcome.latency is not None:
        record["latencyNs"] = outcome.latency
        record["samples"] = len(outcome.samples_ns)
    if outcome.reason:
        record["reason"] = clip(outcome.reason)
    if outcome.defences is not None:
        record["defences"] = [_defence(d) for d in outcome.defences]
    if outcome.timer_cross_check is not None:
        record["timerCrossCheck"] = outcome.timer_cross_check
    return record


MAX_DETAIL = 500


def _defence(defence: Mapping[str, Any]) -> dict[str, Any]:
    record = {"name": defence["name"], "outcome": defence["outcome"]}
    detail = defence.get("detail")
    if detail:
        text = str(detail)
        record["detail"] = text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"
    return record


def job_build(outcomes: Sequence[CaseOutcome]) -> dict[str, Any] | None:
    """``result.build``: how the cases' solution was built and run (the first that says)."""
    return next((o.build for o in outcomes if o.build is not None), None)


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


def timing_clocks(outcomes: Sequence[CaseOutcome]) -> dict[str, list[float]]:
    """Every clock reading taken during the cases' timed batches, by clock name."""
    merged: dict[str, list[float]] = {}
    for outcome in outcomes:
        for name, readings in outcome.timing_clocks_mhz.items():
            merged.setdefault(name, []).extend(readings)
    return merged


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
