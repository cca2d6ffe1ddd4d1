"""SOL-ExecBench leaderboard API responses → KernelIndex runs (pure: bytes in, records out).

Input: the saved responses of ``/api/kernels`` (``kernels.json``, not needed: each
``kernel-<id>.json`` carries its whole definition), ``/api/kernels/<id>`` (``kernel-<id>.json``)
and ``/api/submissions?kernel_id=<id>`` (``submissions*.json``; several pages may be given).
Each submission becomes one :class:`ImportRecord` whose manifests are

* ``run`` — a ``BenchmarkRun`` on the kernel's whole workload suite: ``timing.latencyNs.mean``
  = round(latency_ms · 10⁶) (JavaScript rounding, as KernelIndex), primary statistic ``mean``,
  ``sourceNative = {source: "sol-execbench", benchmark: kernel_name, externalId: "<id>",
  metrics: {latency_ms, sol_score, avg_speedup, fast_1_count, fast_1_total}}`` (the numbers the
  submission states), ``observedAt`` = ``finished_at`` (else ``submitted_at``) as UTC with
  milliseconds (the API's naive times are UTC; finer digits truncated);
* ``protocol`` — "SOL-ExecBench evaluation stack <version>" and ``environment`` — "SOL-ExecBench
  <GPU>, stack <version>", exactly as KernelIndex writes them (for B200 / v1.1 they digest to
  the seed's ``sha256:6383f624…`` and ``sha256:f304afb2…``);
* ``implementation`` — the leaderboard publishes no source, so an explicit no-source revision:
  ``projectRevision.version "submission-<id>"``, ``callable.language "unknown"``, the GPU's
  architecture and product, the definition's input dtypes, ``licensing {}``;
* ``workload`` — the kernel's ``WorkloadSuite`` (cases = the kernel's workloads, aggregation
  latency/mean), on the ``OperationSpec`` of the kernel's definition.

The mapping reproduces the public KernelIndex catalog's manifests and digests (run,
implementation, suite, operation) for the SOL-ExecBench rows (checked in the tests).

Status: ``passed`` only for a submission that is COMPLETED, correct and not disqualified.
KernelIndex skips every other submission; we record it with the closest status:
disqualified → ``policy_violation`` (whatever else it says); COMPLETED but incorrect →
``incorrect_numerical`` (the API does not say which check failed); FAILED/ERROR/RUNTIME_ERROR →
``runtime_error``; COMPILE_ERROR (and spellings) → ``compile_error``; TIMEOUT → ``timeout``;
OOM/RESOURCE_EXCEEDED → ``resource_exceeded``; REWARD_HACK → ``suspected_reward_hack``. A run
that did not pass carries no timing (it makes no performance claim); its numbers stay in
``sourceNative.metrics``. A submission still PENDING/QUEUED/RUNNING, or CANCELLED, is not a result
and is rejected, as is any status not listed here.

The record's snapshot is the submission object in canonical JSON; the kernel definition it was
mapped with travels as an artifact (``kernel-<id>.json``, canonical JSON), so the mapping can be
re-run from stored bytes. The operation and the individual ``WorkloadCase`` manifests are not
part of a run's manifest set; :func:`map_sol_leaderboard_definitions` gives them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from domain.canonical import canonical_json
from domain.documents import parse_json
from domain.errors import DomainError
from domain.importers.records import Artifact, ImportRecord, Rejection, Skipped
from domain.importers.sol_execbench import (
    API_VERSION,
    SOURCE,
    JsonObject,
    MappedDefinition,
    SolFormatError,
    js_round,
    kebab,
    map_definition,
    map_dtype,
    map_hardware,
    to_utc_instant,
)
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.manifest_set import check_manifest_set

__all__ = [
    "KERNELS_URL",
    "implementation_from_submission",
    "leaderboard_environment",
    "leaderboard_protocol",
    "map_sol_leaderboard",
    "map_sol_leaderboard_definitions",
    "run_from_submission",
    "submission_status",
]

KERNELS_URL: Final = "https://research.nvidia.com/benchmarks/sol-execbench/api/kernels"
_KERNEL_FILE = re.compile(r"kernel-(\d+)\.json")
_SUBMISSIONS_FILE = re.compile(r"submissions.*\.json")
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


def _text(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _object(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SolFormatError(f"{where} must be a JSON object")
    return value


def _required(submission: Mapping[str, Any], key: str) -> Any:
    value = submission.get(key)
    if value is None:
        raise SolFormatError(f"submission: required field '{key}' is missing")
    return value


def _string(submission: Mapping[str, Any], key: str) -> str:
    value = _required(submission, key)
    if not isinstance(value, str) or not value:
        raise SolFormatError(f"submission: '{key}' must be a non-empty string")
    return value


def _non_negative_id(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SolFormatError(f"{where} must be a non-negative integer")
    return value


def _flag(submission: Mapping[str, Any], key: str, *, required: bool) -> bool:
    value = submission.get(key)
    if value is None and not required:
        return False
    if not isinstance(value, bool):
        raise SolFormatError(
            f"submission: required field '{key}' is missing"
            if value is None
            else f"submission: '{key}' must be true or false"
        )
    return value


# --- the shared protocol and environment --------------------------------------------------------


def leaderboard_protocol(stack_version: str) -> JsonObject:
    """The protocol of one leaderboard evaluation stack version (KernelIndex's, verbatim)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkProtocol",
        "metadata": {
            "name": f"sol-execbench-leaderboard-{kebab(stack_version)}",
            "title": _text(f"SOL-ExecBench evaluation stack {stack_version}", 200),
        },
        "spec": {
            "harness": {"name": "SOL-ExecBench evaluation stack", "version": stack_version},
            "measurement": {"timer": "harness_reported", "primaryStatistic": "mean"},
            "correctness": {
                "reference": "definition reference implementation",
                "comparator": "sol_execbench_eval",
            },
            "comparability": {
                "family": "sol_execbench_leaderboard",
                "notes": "Suite-mean latency and SOL-Score as published by the SOL-ExecBench "
                "leaderboard. Comparable only within one definition, GPU type, and evaluation "
                "stack version.",
            },
        },
    }


def leaderboard_environment(gpu_type: str, stack_version: str) -> JsonObject:
    """The environment of one GPU type and stack version (KernelIndex's, verbatim)."""
    hardware = map_hardware(gpu_type)
    return {
        "apiVersion": API_VERSION,
        "kind": "ExecutionEnvironment",
        "metadata": {
            "name": f"sol-execbench-{kebab(gpu_type)}-{kebab(stack_version)}",
            "title": _text(f"SOL-ExecBench {hardware.product}, stack {stack_version}", 200),
        },
        "spec": {
            "hardware": hardware.as_json(),
            "software": {"libraries": {"evaluation_stack": stack_version}},
        },
    }


# --- one submission -----------------------------------------------------------------------------


def submission_status(submission: Mapping[str, Any]) -> str:
    """The ``BenchmarkRun`` status of a submission, or a :class:`SolFormatError` saying why none."""
    disqualified = _flag(submission, "is_disqualified", required=False)
    status = _string(submission, "status").upper()
    if disqualified:
        return "policy_violation"
    if status == "COMPLETED":
        return "passed" if _flag(submission, "is_correct", required=True) else "incorrect_numerical"
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
    submission_id = _non_negative_id(submission.get("id"), "submission 'id'")
    username = _string(submission, "username")
    hardware = map_hardware(_string(submission, "gpu_type"))
    inputs = _object(definition.get("inputs"), "kernel 'inputs'")
    dtypes = set()
    for name, raw in inputs.items():
        dtype = _object(raw, f"kernel input '{name}'").get("dtype")
        if not isinstance(dtype, str):
            raise SolFormatError(f"kernel input '{name}': 'dtype' must be a string")
        dtypes.add(map_dtype(dtype))
    return {
        "apiVersion": API_VERSION,
        "kind": "ImplementationRevision",
        "metadata": {
            "name": f"sol-submission-{submission_id}",
            "title": _text(f"{username} · {_string(submission, 'kernel_name')}", 200),
            "authors": [{"name": _text(username, 200)}],
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


def run_from_submission(
    submission: Mapping[str, Any],
    *,
    implementation_digest: str,
    workload_digest: str,
    protocol_digest: str,
    environment_digest: str,
) -> JsonObject:
    """A submission's ``BenchmarkRun`` on its kernel's suite; status: :func:`submission_status`."""
    submission_id = _non_negative_id(submission.get("id"), "submission 'id'")
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
        latency = metrics.get("latency_ms")
        if latency is None:
            raise SolFormatError("submission: a passed submission must state latency_ms")
        if latency <= 0:
            raise SolFormatError(f"submission: latency_ms must be positive, got {latency}")
        spec["timing"] = {
            "primaryStatistic": "mean",
            "latencyNs": {"mean": js_round(latency * 1e6)},
        }
    native: JsonObject = {
        "source": SOURCE,
        "benchmark": _text(_string(submission, "kernel_name"), 200),
        "externalId": str(submission_id),
    }
    if metrics:
        native["metrics"] = metrics
    spec["sourceNative"] = native
    for when in ("finished_at", "submitted_at"):
        if submission.get(when) is not None:
            spec["observedAt"] = to_utc_instant(submission[when], f"submission '{when}'")
            break
    else:
        raise SolFormatError("submission: required field 'finished_at' is missing")
    metadata: JsonObject = {
        "name": f"sol-submission-{submission_id}",
        "title": _text(
            f"{_string(submission, 'username')} · {_string(submission, 'kernel_name')} · "
            f"{_string(submission, 'gpu_type')}",
            200,
        ),
    }
    worker = submission.get("worker_id")
    if isinstance(worker, str) and worker:
        metadata["labels"] = {"worker": _text(worker, 200)}
    return {"apiVersion": API_VERSION, "kind": "BenchmarkRun", "metadata": metadata, "spec": spec}


# --- reading the saved responses ------------------------------------------------------------------


@dataclass(frozen=True)
class _Kernel:
    definition: Mapping[str, Any]
    mapped: MappedDefinition
    artifact: Artifact


def _data(document: object) -> object:
    """The payload of an API response (``{"data": ...}``), or the document itself."""
    if isinstance(document, Mapping) and "data" in document:
        return document["data"]
    return document


def _kernel(file_name: str, kernel_id: int, data: bytes) -> _Kernel:
    definition = _object(_data(parse_json(data)), file_name)
    stated = definition.get("id")
    if stated is not None and stated != kernel_id:
        raise SolFormatError(f"{file_name} holds kernel {stated!r}, not kernel {kernel_id}")
    workloads = definition.get("workloads")
    if not isinstance(workloads, list):
        raise SolFormatError(f"{file_name}: 'workloads' must be an array")
    entries = [_object(w, f"{file_name}: workloads[{i}]") for i, w in enumerate(workloads)]
    mapped = map_definition(definition, entries, source_url=KERNELS_URL)
    artifact = Artifact(canonical_json(definition), "application/json", file_name)
    return _Kernel(definition, mapped, artifact)


def _kernels(files: Mapping[str, bytes]) -> dict[int, _Kernel | str]:
    """Every ``kernel-<id>.json``, mapped, or the reason it cannot be."""
    kernels: dict[int, _Kernel | str] = {}
    numbered = []
    for name in files:
        match = _KERNEL_FILE.fullmatch(name)
        if match is not None:
            numbered.append((int(match.group(1)), name))
    for kernel_id, name in sorted(numbered):
        try:
            kernels[kernel_id] = _kernel(name, kernel_id, files[name])
        except DomainError as exc:
            kernels[kernel_id] = f"{name}: {exc.message}"
    return kernels


def map_sol_leaderboard_definitions(
    files: Mapping[str, bytes],
) -> Iterator[MappedDefinition | Rejection]:
    """The operation, workload cases and suite of every ``kernel-<id>.json``, by kernel id."""
    for kernel_id, kernel in _kernels(files).items():
        if isinstance(kernel, str):
            yield Rejection(f"kernel/{kernel_id}", kernel)
        else:
            yield kernel.mapped


def _submissions(name: str, data: bytes) -> list[object]:
    payload = _data(parse_json(data))
    if isinstance(payload, Mapping):
        payload = payload.get("submissions")
    if not isinstance(payload, list):
        raise SolFormatError(f"{name}: expected a list of submissions under data.submissions")
    return payload


def _record(submission: Mapping[str, Any], kernels: Mapping[int, _Kernel | str]) -> ImportRecord:
    submission_id = _non_negative_id(_required(submission, "id"), "submission 'id'")
    kernel_id = _non_negative_id(_required(submission, "kernel_id"), "submission 'kernel_id'")
    kernel = kernels.get(kernel_id)
    if kernel is None:
        raise SolFormatError(f"kernel-{kernel_id}.json, the definition it ran on, is not given")
    if isinstance(kernel, str):
        raise SolFormatError(f"its kernel cannot be mapped: {kernel}")
    kernel_name = _string(submission, "kernel_name")
    if kernel_name != kernel.mapped.name:
        raise SolFormatError(
            f"submission is for '{kernel_name}', but kernel {kernel_id} is '{kernel.mapped.name}'"
        )
    assert kernel.mapped.suite is not None and kernel.mapped.suite_digest is not None
    stack_version = _string(submission, "evaluation_stack_version")
    gpu_type = _string(submission, "gpu_type")
    protocol = leaderboard_protocol(stack_version)
    environment = leaderboard_environment(gpu_type, stack_version)
    implementation = implementation_from_submission(
        submission, kernel.definition, kernel.mapped.operation_digest
    )
    run = run_from_submission(
        submission,
        implementation_digest=manifest_digest(implementation),
        workload_digest=kernel.mapped.suite_digest,
        protocol_digest=manifest_digest(protocol),
        environment_digest=manifest_digest(environment),
    )
    manifests = {
        "run": run,
        "protocol": protocol,
        "environment": environment,
        "implementation": implementation,
        "workload": copy.deepcopy(kernel.mapped.suite),
    }
    check_manifest_set(manifests)
    return ImportRecord(
        source=SOURCE,
        external_id=str(submission_id),
        manifests=manifests,
        snapshot=Artifact(
            canonical_json(submission), "application/json", f"submission-{submission_id}.json"
        ),
        artifacts=(kernel.artifact,),
    )


def map_sol_leaderboard(files: Mapping[str, bytes]) -> Iterator[ImportRecord | Rejection]:
    """Every submission in ``submissions*.json`` as a record, or a rejection with its reason.

    Files are read in name order, submissions in page order; a submission repeated verbatim
    (overlapping pages) is imported once (the repeat is :class:`Skipped`), one repeated with
    different content is rejected. Files not read, an empty page and a kernel file that cannot
    be mapped and that no submission names are reported too, each with the reason.
    """
    kernels = _kernels(files)
    seen: dict[int, tuple[bytes, str]] = {}
    named: set[int] = set()
    pages = sorted(n for n in files if _SUBMISSIONS_FILE.fullmatch(n))
    yield from _unread(files, pages)
    for name in pages:
        try:
            submissions = _submissions(name, files[name])
        except DomainError as exc:
            yield Rejection(None, f"{name}: {exc.message}")
            continue
        if not submissions:
            yield Skipped(None, f"{name}: no submissions, so there is no run to import")
        for index, raw in enumerate(submissions):
            raw_id = raw.get("id") if isinstance(raw, Mapping) else None
            external_id = (
                str(raw_id) if isinstance(raw_id, int) and not isinstance(raw_id, bool) else None
            )
            where = f"{name} submission #{index + 1}"
            if isinstance(raw, Mapping) and isinstance(raw.get("kernel_id"), int):
                named.add(raw["kernel_id"])
            try:
                submission = _object(raw, where)
                record = _record(submission, kernels)
            except DomainError as exc:
                yield Rejection(external_id, f"{where}: {exc.message}")
                continue
            submission_id = int(record.external_id)
            previous = seen.get(submission_id)
            if previous is not None:
                content, first = previous
                if content != record.snapshot.content:
                    yield Rejection(
                        record.external_id,
                        f"{where}: submission {submission_id} appears twice with different content",
                    )
                else:
                    yield Skipped(
                        record.external_id,
                        f"{where}: submission {submission_id} repeats {first} verbatim "
                        "(overlapping pages); imported once",
                    )
                continue
            seen[submission_id] = (record.snapshot.content, where)
            yield record
    for kernel_id, kernel in kernels.items():
        if isinstance(kernel, str) and kernel_id not in named:
            yield Rejection(f"kernel/{kernel_id}", f"{kernel} (no submission here names it)")


def _unread(files: Mapping[str, bytes], pages: list[str]) -> Iterator[Skipped]:
    """What the import does not read, and why (every run comes from a submissions page)."""
    if not pages:
        yield Skipped(None, "no submissions*.json among the files, so there is no run to import")
    for name in sorted(files):
        if name in pages or _KERNEL_FILE.fullmatch(name):
            continue
        if name == "kernels.json":
            why = "the kernel listing (/api/kernels) holds no results; kernel-<id>.json are read"
        else:
            why = "neither kernel-<id>.json nor submissions*.json; not read"
        yield Skipped(None, f"{name}: {why}")
