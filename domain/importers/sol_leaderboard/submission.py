"""One SOL-ExecBench leaderboard submission → its run and its no-source implementation.

Status: ``passed`` only for a submission that is COMPLETED, correct and not disqualified.
KernelIndex skips every other submission; we record it with the closest status:
disqualified → ``policy_violation`` (whatever else it says); COMPLETED but incorrect →
``incorrect_numerical`` (the API does not say which check failed); FAILED/ERROR/RUNTIME_ERROR →
``runtime_error``; COMPILE_ERROR (and spellings) → ``compile_error``; TIMEOUT → ``timeout``;
OOM/RESOURCE_EXCEEDED → ``resource_exceeded``; REWARD_HACK → ``suspected_reward_hack``. A run
that did not pass carries no timing (it makes no performance claim); its numbers stay in
``sourceNative.metrics``. A submission still PENDING/QUEUED/RUNNING, or CANCELLED, is not a result
and is rejected, as is any status not listed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from domain.importers.catalog_form import js_round
from domain.importers.names import MAX_TITLE, clip
from domain.importers.sol_execbench.fields import JsonObject, SolFormatError
from domain.importers.sol_execbench.values import to_utc_instant
from domain.importers.sol_execbench.vocabulary import SOURCE, map_dtype, map_hardware
from domain.importers.sol_leaderboard.fields import (
    flag,
    json_object,
    non_negative_id,
    required_string,
)
from domain.manifests.kinds import API_VERSION

METRICS: Final = ("latency_ms", "sol_score", "avg_speedup", "fast_1_count", "fast_1_total")

_FAILED_STATUS: Final[Mapping[str, str]] = {
    "FAILED": "runtime_error",
    "ERROR": "runtime_error",
    "RUNTIME_ERROR": "runtime_error",
    "COMPILE_ERROR": "compile_error",
    "COMPILATION_ERROR": "compile_error",
    "COMPILATION_FAILED": "compile_error",
    "BUILD_ERROR": "compile_error",
    "BUILD_FAILED": "compile_error",
    "TIMEOUT": "timeout",
    "TIMED_OUT": "timeout",
    "OOM": "resource_exceeded",
    "OUT_OF_MEMORY": "resource_exceeded",
    "RESOURCE_EXCEEDED": "resource_exceeded",
    "REWARD_HACK": "suspected_reward_hack",
}
_UNFINISHED_STATUS: Final = frozenset(
    {"PENDING", "QUEUED", "SUBMITTED", "RUNNING", "EVALUATING", "CANCELLED", "CANCELED"}
)


def submission_status(submission: Mapping[str, Any]) -> str:
    """The ``BenchmarkRun`` status of a submission, or a :class:`SolFormatError` saying why none."""
    disqualified = flag(submission, "is_disqualified", required=False)
    status = required_string(submission, "status").upper()
    if disqualified:
        return "policy_violation"
    if status == "COMPLETED":
        return "passed" if flag(submission, "is_correct", required=True) else "incorrect_numerical"
    if status in _FAILED_STATUS:
        return _FAILED_STATUS[status]
    if status in _UNFINISHED_STATUS:
        raise SolFormatError(f"submission is {status}, not a finished result")
    raise SolFormatError(f"submission has unknown status {submission.get('status')!r}")


def _metrics(submission: Mapping[str, Any]) -> dict[str, int | float]:
    metrics: dict[str, int | float] = {}
    for key in METRICS:
        value = submission.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SolFormatError(f"submission: '{key}' must be a number")
        metrics[key] = value
    latency = metrics.get("latency_ms")
    if latency is not None and latency < 0:
        raise SolFormatError(f"submission: latency_ms is negative ({latency})")
    return metrics


def implementation_from_submission(
    submission: Mapping[str, Any], definition: Mapping[str, Any], operation_digest: str
) -> JsonObject:
    """The no-source implementation revision a leaderboard submission stands for."""
    submission_id = non_negative_id(submission.get("id"), "submission 'id'")
    username = required_string(submission, "username")
    hardware = map_hardware(required_string(submission, "gpu_type"))
    inputs = json_object(definition.get("inputs"), "kernel 'inputs'")
    dtypes = set()
    for name, raw in inputs.items():
        dtype = json_object(raw, f"kernel input '{name}'").get("dtype")
        if not isinstance(dtype, str):
            raise SolFormatError(f"kernel input '{name}': 'dtype' must be a string")
        dtypes.add(map_dtype(dtype))
    return {
        "apiVersion": API_VERSION,
        "kind": "ImplementationRevision",
        "metadata": {
            "name": f"sol-submission-{submission_id}",
            "title": clip(f"{username} · {required_string(submission, 'kernel_name')}", MAX_TITLE),
            "authors": [{"name": clip(username, MAX_TITLE)}],
        },
        "spec": {
            "projectRevision": {"version": f"submission-{submission_id}"},
            "operation": {"specDigest": operation_digest},
            "callable": {"language": "unknown"},
            "support": {
                "hardwareArchitectures": [hardware.architecture],
                "productsTested": [hardware.product],
                "dtypes": sorted(dtypes),
            },
            "licensing": {},
        },
    }


def _timing(metrics: Mapping[str, int | float]) -> JsonObject:
    """The timing of a passed submission: its suite-mean latency."""
    latency = metrics.get("latency_ms")
    if latency is None:
        raise SolFormatError("submission: a passed submission must state latency_ms")
    if latency <= 0:
        raise SolFormatError(f"submission: latency_ms must be positive, got {latency}")
    return {"primaryStatistic": "mean", "latencyNs": {"mean": js_round(latency * 1e6)}}


def _observed_at(submission: Mapping[str, Any]) -> str:
    """``finished_at``, else ``submitted_at``, as a UTC instant."""
    for when in ("finished_at", "submitted_at"):
        if submission.get(when) is not None:
            return to_utc_instant(submission[when], f"submission '{when}'")
    raise SolFormatError("submission: required field 'finished_at' is missing")


def run_from_submission(
    submission: Mapping[str, Any],
    *,
    implementation_digest: str,
    workload_digest: str,
    protocol_digest: str,
    environment_digest: str,
) -> JsonObject:
    """A submission's ``BenchmarkRun`` on its kernel's suite; status: :func:`submission_status`."""
    submission_id = non_negative_id(submission.get("id"), "submission 'id'")
    status = submission_status(submission)
    metrics = _metrics(submission)
    spec: JsonObject = {
        "implementationDigest": implementation_digest,
        "workloadDigest": workload_digest,
        "protocolDigest": protocol_digest,
        "environmentDigest": environment_digest,
        "status": status,
    }
    if status == "passed":
        spec["timing"] = _timing(metrics)
    native: JsonObject = {
        "source": SOURCE,
        "benchmark": clip(required_string(submission, "kernel_name"), MAX_TITLE),
        "externalId": str(submission_id),
    }
    if metrics:
        native["metrics"] = metrics
    spec["sourceNative"] = native
    spec["observedAt"] = _observed_at(submission)
    metadata: JsonObject = {
        "name": f"sol-submission-{submission_id}",
        "title": clip(
            f"{required_string(submission, 'username')} · "
            f"{required_string(submission, 'kernel_name')} · "
            f"{required_string(submission, 'gpu_type')}",
            MAX_TITLE,
        ),
    }
    worker = submission.get("worker_id")
    if isinstance(worker, str) and worker:
        metadata["labels"] = {"worker": clip(worker, MAX_TITLE)}
    return {"apiVersion": API_VERSION, "kind": "BenchmarkRun", "metadata": metadata, "spec": spec}
