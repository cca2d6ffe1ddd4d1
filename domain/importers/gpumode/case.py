"""One benchmark case of a KernelBot submission run → its workload and its run record.

``run_result`` holds the cases as ``benchmark.<i>.{spec,mean,best,worst,std,runs}``: the
case's axes are parsed from ``spec`` (``"k: 7168; m: 1024; n: 1536; seed: 8135"``) into a
``WorkloadCase`` of the problem's operation; the statistics (nanoseconds) become the run's
``timing.latencyNs`` mean/minimum/maximum (JavaScript-rounded), ``samples`` and a
``latency:std:ns`` measurement, as the catalog represents KernelBot per-case results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.importers.catalog_form import checked, js_round, manifest
from domain.importers.fields import MappingError, identifier, integer, numeric_text, text
from domain.importers.gpumode.dataset import COMPARATOR, SOURCE
from domain.importers.gpumode.problems import Problem
from domain.importers.names import MAX_TITLE, clip, object_name
from domain.importers.operations import axis_values, resolve_shape
from domain.importers.records import Artifact, ImportRecord
from domain.manifests.canonical_form import manifest_digest


@dataclass(frozen=True)
class SubmissionRun:
    """What every benchmark case of one ranked submission run shares."""

    where: str  # the row, for reasons
    submission: int
    leaderboard: str
    problem: Problem
    operation_digest: str
    observed_at: str
    result: Mapping[str, Any]  # run_result
    score: object  # run_score, read per case (a bad one rejects each case)
    labels: dict[str, str]  # runner software, shared by every case's run
    protocol: dict[str, Any]
    protocol_digest: str
    environment: dict[str, Any]
    environment_digest: str
    implementation: dict[str, Any]
    implementation_digest: str
    snapshot: Artifact
    artifacts: tuple[Artifact, ...]  # the leaderboard row (when given), then the code


def parse_case_spec(spec: str, where: str) -> dict[str, int]:
    """``"k: 7168; m: 1024; seed: 8135"`` → ``{"k": 7168, "m": 1024, "seed": 8135}``."""
    axes: dict[str, int] = {}
    for part in spec.split(";"):
        if not part.strip():
            continue
        key, sep, value = part.partition(":")
        if not sep:
            raise MappingError(f"{where}: {part.strip()!r} is not 'name: value'")
        name = identifier(key, where)
        try:
            axes[name] = int(value.strip())
        except ValueError:
            raise MappingError(
                f"{where}: axis {name} = {value.strip()!r} is not an integer"
            ) from None
    if not axes:
        raise MappingError(f"{where}: no axes in {spec!r}")
    return axes


def _statistic(result: Mapping[str, Any], prefix: str, key: str, *, required: bool = True) -> Any:
    """``run_result["<prefix>.<key>"]`` as a number (positive, except ``std``), or None."""
    value = result.get(f"{prefix}.{key}")
    if value is None:
        if required:
            raise MappingError(f"run_result.{prefix}.{key} is missing")
        return None
    return numeric_text(value, f"run_result.{prefix}.{key}", positive=key != "std")


def _workload(
    problem: Problem, operation_digest: str, axes: dict[str, int], where: str
) -> dict[str, Any]:
    op_axes = problem.operation["spec"]["axes"]
    for name in axes:
        if op_axes.get(name, {}).get("role") != "variable":
            raise MappingError(f"{where}: {name!r} is not a variable axis of {problem.leaderboard}")
    values = axis_values(op_axes, axes, where)
    tensors = {
        item["name"]: {
            "dtype": item["tensor"]["dtype"],
            "shape": resolve_shape(item["tensor"]["shape"], values, f"{where}: {item['name']}"),
        }
        for item in problem.operation["spec"]["inputs"]
        if "tensor" in item
    }
    ordered = sorted(axes)
    return manifest(
        "WorkloadCase",
        {
            "name": object_name(problem.slug, *(f"{k}{axes[k]}" for k in ordered)),
            "title": clip(
                f"{problem.title} · " + ", ".join(f"{k}={v}" for k, v in axes.items()), MAX_TITLE
            ),
        },
        {
            "axes": axes,
            "tensors": tensors,
            "correctness": {"comparator": COMPARATOR},
            "operationSpecDigest": operation_digest,
        },
    )


@dataclass(frozen=True)
class _Measured:
    """A case's statistics (ns) and the run's ``timing`` made of them."""

    timing: dict[str, Any]
    mean: Any
    best: Any
    std: Any
    samples: int | None


def _measure(result: Mapping[str, Any], prefix: str) -> _Measured:
    mean = _statistic(result, prefix, "mean")
    best, worst, std, runs = (
        _statistic(result, prefix, key, required=False) for key in ("best", "worst", "std", "runs")
    )
    latency: dict[str, int] = {"mean": js_round(mean)}
    if best is not None:
        latency["minimum"] = js_round(best)
    if worst is not None:
        latency["maximum"] = js_round(worst)
    timing: dict[str, Any] = {"latencyNs": latency, "primaryStatistic": "mean"}
    samples = integer(runs, f"run_result.{prefix}.runs") if runs is not None else None
    if samples is not None:
        timing["samples"] = samples
    return _Measured(timing, mean, best, std, samples)


def _std_measurement(std: Any, samples: int | None) -> dict[str, Any]:
    measurement: dict[str, Any] = {
        "unit": "ns",
        "value": std,
        "metric": "latency",
        "statistic": "std",
    }
    if samples is not None:
        measurement["sampleCount"] = samples
    return measurement


def case_record(run: SubmissionRun, case: int, external_id: str) -> ImportRecord:
    """Case ``case`` of the submission run as a record (raises on what cannot be mapped)."""
    prefix = f"benchmark.{case}"
    spec_text = text(run.result.get(f"{prefix}.spec"), f"run_result.{prefix}.spec")
    axes = parse_case_spec(spec_text, f"run_result.{prefix}.spec")
    workload = _workload(run.problem, run.operation_digest, axes, f"case {case}")
    measured = _measure(run.result, prefix)
    metrics: dict[str, Any] = {"mean_ns": measured.mean}
    if measured.best is not None:
        metrics["best_ns"] = measured.best
    if run.score is not None:
        metrics["leaderboard_score_s"] = numeric_text(run.score, f"{run.where}.run_score")
    run_spec: dict[str, Any] = {
        "status": "passed",
        "timing": measured.timing,
        "observedAt": run.observed_at,
        "sourceNative": {
            "source": SOURCE,
            "metrics": metrics,
            "benchmark": f"{run.leaderboard}/{case}",
            "externalId": f"submission/{run.submission}",
        },
        "protocolDigest": run.protocol_digest,
        "workloadDigest": manifest_digest(workload),
        "environmentDigest": run.environment_digest,
        "implementationDigest": run.implementation_digest,
    }
    if measured.std is not None:
        run_spec["measurements"] = [_std_measurement(measured.std, measured.samples)]
    metadata: dict[str, Any] = {
        "name": object_name(
            "kernelbot", str(run.submission), *(f"{k}{axes[k]}" for k in sorted(axes))
        ),
        "title": clip(f"{run.leaderboard} · submission {run.submission} · case {case}", MAX_TITLE),
    }
    if run.labels:
        metadata["labels"] = run.labels
    return checked(
        ImportRecord(
            source=SOURCE,
            external_id=external_id,
            manifests={
                "run": manifest("BenchmarkRun", metadata, run_spec),
                "protocol": run.protocol,
                "environment": run.environment,
                "implementation": run.implementation,
                "workload": workload,
            },
            snapshot=run.snapshot,
            artifacts=run.artifacts,
        )
    )
