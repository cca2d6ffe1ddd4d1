"""SOL-ExecBench trace lines → one ``BenchmarkRun`` record each (the folder mapper).

Each trace line becomes one ``BenchmarkRun`` on one ``WorkloadCase`` (protocol "SOL-ExecBench
trace harness", environment from the trace's ``evaluation.environment``). Status mapping:
PASSED → passed, INCORRECT_SHAPE/_DTYPE/_NUMERICAL → incorrect_shape/_dtype/_numerical,
RUNTIME_ERROR → runtime_error, COMPILE_ERROR → compile_error, TIMEOUT → timeout,
REWARD_HACK → suspected_reward_hack, INVALID_REFERENCE → invalid_reference; anything else is
rejected. Raw evidence: ``spec.evidence.logs`` names the evaluation log (text/plain artifact)
when the trace has one, else the trace record itself (its canonical JSON, also the snapshot).
The case names its rerun workload artifact (the definition and the trace's workload entry) in
``metadata.sourceRefs``; the implementation's source is the whole solution document, which is
what a rerun runs (:func:`~domain.importers.records.rerun_artifacts`).

A folder without ``trace*.jsonl`` yields **no record** (one :class:`Skipped` saying why): a
record is a run, and a solution alone is not a result.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from domain.canonical import canonical_json
from domain.errors import DomainError
from domain.importers.catalog_form import js_round
from domain.importers.names import MAX_TITLE, clip
from domain.importers.records import (
    Artifact,
    ImportRecord,
    Rejection,
    Skipped,
    manifest_artifact,
    referencing,
    workload_artifact,
)
from domain.importers.sol_execbench.definition import MappedDefinition
from domain.importers.sol_execbench.fields import (
    JsonObject,
    SolFormatError,
    json_object,
    number,
    optional_number,
    required_string,
)
from domain.importers.sol_execbench.folder import SOLUTION_FILE, Folder, json_lines, read_folder
from domain.importers.sol_execbench.solution import MappedSolution
from domain.importers.sol_execbench.values import kebab, to_utc_instant
from domain.importers.sol_execbench.vocabulary import (
    COMPARATOR,
    SOURCE,
    map_hardware,
    map_language,
)
from domain.importers.sol_execbench.workload import case_from_entry, workload_entry_key
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.kinds import API_VERSION
from domain.manifests.manifest_set import check_manifest_set

_TRACE_FILE: Final = re.compile(r"trace.*\.jsonl")

TRACE_STATUS: Final[Mapping[str, str]] = {
    "PASSED": "passed",
    "INCORRECT_SHAPE": "incorrect_shape",
    "INCORRECT_NUMERICAL": "incorrect_numerical",
    "INCORRECT_DTYPE": "incorrect_dtype",
    "RUNTIME_ERROR": "runtime_error",
    "COMPILE_ERROR": "compile_error",
    "TIMEOUT": "timeout",
    "REWARD_HACK": "suspected_reward_hack",
    "INVALID_REFERENCE": "invalid_reference",
}

_ERROR_BOUNDS: Final = (
    ("max_absolute_error", "maximumAbsoluteError"),
    ("max_relative_error", "maximumRelativeError"),
)


def trace_protocol() -> JsonObject:
    """The protocol of runs measured by the SOL-ExecBench harness itself (traces)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkProtocol",
        "metadata": {"name": "sol-execbench-trace", "title": "SOL-ExecBench trace harness"},
        "spec": {
            "harness": {
                "name": "sol-execbench",
                "repository": "https://github.com/nvidia/sol-execbench",
            },
            "measurement": {"timer": "harness_reported", "primaryStatistic": "mean"},
            "correctness": {
                "reference": "definition reference implementation",
                "comparator": COMPARATOR,
            },
            "comparability": {"family": "sol_execbench_trace"},
        },
    }


def trace_environment(environment: Mapping[str, Any]) -> JsonObject:
    """A trace's ``evaluation.environment`` → ``ExecutionEnvironment``."""
    where = "trace evaluation.environment"
    hardware_name = required_string(environment, "hardware", where)
    libs = json_object(environment.get("libs", {}), f"{where}: 'libs'")
    versions: dict[str, str] = {}
    for name, version in libs.items():
        if not isinstance(version, str):
            raise SolFormatError(f"{where}: libs '{name}' must be a version string")
        versions[str(name)] = version
    hardware = map_hardware(hardware_name)
    software: JsonObject = {}
    if "cuda" in versions:
        software["cudaToolkit"] = versions["cuda"]
    if versions.get("torch"):
        software["framework"] = {"name": "pytorch", "version": versions["torch"]}
    libraries = {map_language(k): v for k, v in versions.items() if k not in ("cuda", "torch")}
    if libraries:
        software["libraries"] = libraries
    name = kebab("-".join(["sol-trace", hardware_name, *versions.values()]))
    return {
        "apiVersion": API_VERSION,
        "kind": "ExecutionEnvironment",
        "metadata": {
            "name": name,
            "title": clip(f"{hardware.product} (trace-reported software)", MAX_TITLE),
        },
        "spec": {"hardware": hardware.as_json(), "software": software},
    }


# --- the parts of one trace -----------------------------------------------------------------------


def _definition_of(folder: Folder) -> tuple[Mapping[str, Any], MappedDefinition, Artifact]:
    if folder.definition is None or folder.mapped is None or folder.definition_artifact is None:
        raise SolFormatError(f"trace cannot be mapped: {folder.definition_problem}")
    return folder.definition, folder.mapped, folder.definition_artifact


def _solution_of(
    trace: Mapping[str, Any], folder: Folder, mapped: MappedDefinition
) -> tuple[str, str, MappedSolution]:
    """``(definition name, solution name, solution)`` of the trace, both from this folder."""
    definition_name = required_string(trace, "definition", "trace")
    if definition_name != mapped.name:
        raise SolFormatError(
            f"trace is for definition '{definition_name}', not this folder's '{mapped.name}'"
        )
    solution_name = required_string(trace, "solution", "trace")
    solution = folder.solutions.get(solution_name)
    if solution is None:
        unreadable = "; ".join(folder.solution_problems)
        raise SolFormatError(
            f"trace names solution '{solution_name}', which this folder does not provide"
            + (f" (unreadable: {unreadable})" if unreadable else "")
        )
    return definition_name, solution_name, solution


def _status(evaluation: Mapping[str, Any]) -> str:
    raw_status = required_string(evaluation, "status", "trace evaluation")
    status = TRACE_STATUS.get(raw_status)
    if status is None:
        raise SolFormatError(f"trace evaluation: unknown status {raw_status!r}")
    return status


def _correctness(evaluation: Mapping[str, Any]) -> JsonObject | None:
    raw_correctness = evaluation.get("correctness")
    if raw_correctness is None:
        return None
    correctness = json_object(raw_correctness, "trace evaluation 'correctness'")
    block: JsonObject = {"comparator": COMPARATOR}
    for source_key, target_key in _ERROR_BOUNDS:
        value = optional_number(correctness, source_key, "trace evaluation.correctness")
        if value is not None:
            if value < 0:
                raise SolFormatError(f"trace evaluation.correctness: '{source_key}' < 0")
            block[target_key] = value
    return block


def _performance(
    evaluation: Mapping[str, Any], status: str
) -> tuple[JsonObject | None, JsonObject]:
    """``(timing, metrics)``: no timing when the trace reports no performance."""
    raw_performance = evaluation.get("performance")
    metrics: JsonObject = {}
    if raw_performance is None:
        if status == "passed":
            raise SolFormatError("trace evaluation: a PASSED trace must report its performance")
        return None, metrics
    performance = json_object(raw_performance, "trace evaluation 'performance'")
    latency = number(performance.get("latency_ms"), "trace performance 'latency_ms'")
    if latency <= 0:
        raise SolFormatError(f"trace performance: latency_ms must be positive, got {latency}")
    timing = {"primaryStatistic": "mean", "latencyNs": {"mean": js_round(latency * 1e6)}}
    metrics["latency_ms"] = latency
    for extra in ("reference_latency_ms", "speedup_factor"):
        value = optional_number(performance, extra, "trace performance")
        if value is not None:
            metrics[extra] = value
    return timing, metrics


def _evidence(trace: Mapping[str, Any], evaluation: Mapping[str, Any]) -> tuple[Artifact, Artifact]:
    """``(snapshot, evidence)``: the trace itself, and its log when it has one (else the trace
    again: the raw record is the evidence)."""
    snapshot = Artifact(canonical_json(trace), "application/json", "trace.json")
    log = evaluation.get("log")
    if log is not None and not isinstance(log, str):
        raise SolFormatError("trace evaluation: 'log' must be a string")
    evidence = Artifact(log.encode("utf-8"), "text/plain", "evaluation.log") if log else snapshot
    return snapshot, evidence


def _trace_record(trace: Mapping[str, Any], folder: Folder) -> ImportRecord:
    definition, mapped, definition_artifact = _definition_of(folder)
    definition_name, solution_name, solution = _solution_of(trace, folder, mapped)
    workload = json_object(trace.get("workload"), "trace 'workload'")
    key = workload_entry_key(workload, "trace workload")
    entry = folder.entries.get(key, workload)
    # The case with what a rerun of it fetches: the definition and this one workload entry.
    rerun_workload = workload_artifact(definition, [entry])
    case = referencing(case_from_entry(definition, mapped.operation_digest, entry), rerun_workload)
    evaluation = json_object(trace.get("evaluation"), "trace 'evaluation'")
    status = _status(evaluation)
    environment_source = json_object(
        evaluation.get("environment"), "trace evaluation 'environment'"
    )
    environment = trace_environment(environment_source)
    hardware_name = required_string(environment_source, "hardware", "trace evaluation.environment")
    observed_at = to_utc_instant(evaluation.get("timestamp"), "trace evaluation 'timestamp'")
    protocol = trace_protocol()
    external_id = f"trace/{solution_name}/{key}/{hardware_name}"

    spec: JsonObject = {
        "implementationDigest": solution.implementation_digest,
        "workloadDigest": manifest_digest(case),
        "protocolDigest": manifest_digest(protocol),
        "environmentDigest": manifest_digest(environment),
        "status": status,
    }
    correctness = _correctness(evaluation)
    if correctness is not None:
        spec["correctness"] = correctness
    timing, metrics = _performance(evaluation, status)
    if timing is not None:
        spec["timing"] = timing
    native: JsonObject = {"source": SOURCE, "benchmark": definition_name, "externalId": external_id}
    if metrics:
        native["metrics"] = metrics
    spec["sourceNative"] = native
    snapshot, evidence = _evidence(trace, evaluation)
    spec["evidence"] = {
        "logs": {"uri": f"kernelindex:artifact/{evidence.digest}", "digest": evidence.digest}
    }
    spec["observedAt"] = observed_at
    run: JsonObject = {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkRun",
        "metadata": {
            "name": kebab(f"sol-trace-{solution_name}-{key[:8]}-{hardware_name}") or "sol-trace",
            "title": clip(f"{solution_name} · {definition_name} · {hardware_name}", MAX_TITLE),
        },
        "spec": spec,
    }
    manifests = {
        "run": run,
        "protocol": protocol,
        "environment": environment,
        "implementation": copy.deepcopy(solution.implementation),
        "workload": case,
    }
    check_manifest_set(manifests)
    # The solution carries the definition too when the folder had one: each stored once.
    operation = manifest_artifact(mapped.operation)  # what the operation's page explains it from
    artifacts = list(
        dict.fromkeys([*solution.artifacts, definition_artifact, operation, rerun_workload])
    )
    if evidence is not snapshot:
        artifacts.append(evidence)
    return ImportRecord(
        source=SOURCE,
        external_id=external_id,
        manifests=manifests,
        snapshot=snapshot,
        artifacts=tuple(artifacts),
    )


def _trace_id(trace: Mapping[str, Any]) -> str | None:
    """The external id a trace would have, as far as it can be read (for its rejection)."""
    try:
        workload = json_object(trace.get("workload"), "trace 'workload'")
        evaluation = json_object(trace.get("evaluation"), "trace 'evaluation'")
        environment = json_object(evaluation.get("environment"), "environment")
        hardware = required_string(environment, "hardware", "environment")
        solution = required_string(trace, "solution", "trace")
        return f"trace/{solution}/{workload_entry_key(workload)}/{hardware}"
    except DomainError:
        return None


def map_sol_execbench(files: Mapping[str, bytes]) -> Iterator[ImportRecord | Rejection]:
    """A benchmark folder's traces as runs (one per trace line), or rejections with reasons.

    ``files`` maps file names (``definition.json``, ``workload.jsonl``, ``solution*.json``,
    ``trace*.jsonl``) to their bytes. Without trace files one :class:`Skipped` says so.
    """
    trace_files = sorted(n for n in files if _TRACE_FILE.fullmatch(n))
    folder = read_folder(files)
    if not trace_files:
        solutions = sum(1 for n in files if SOLUTION_FILE.fullmatch(n))
        held = [
            *(["a definition"] if "definition.json" in files else []),
            f"{len(folder.entries)} workload entries",
            f"{solutions} solution(s)",
        ]
        yield Skipped(
            None,
            f"no trace*.jsonl in the folder ({', '.join(held)}): a run is a trace's result, so "
            "there is no run to import (solutions are kept as implementations, not runs)",
        )
        return
    for file_name in trace_files:
        for number_, trace in json_lines(files[file_name]):
            if isinstance(trace, DomainError):
                yield Rejection(None, f"{file_name} line {number_}: {trace.message}")
                continue
            try:
                yield _trace_record(trace, folder)
            except DomainError as exc:
                yield Rejection(_trace_id(trace), f"{file_name} line {number_}: {exc.message}")
