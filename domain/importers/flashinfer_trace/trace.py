"""A FlashInfer-Bench dataset folder's trace lines → one run record each (the mapper).

Every trace line becomes a ``BenchmarkRun`` with its protocol, environment, implementation and
workload (:func:`map_flashinfer_trace`); whatever cannot be mapped becomes a
:class:`Rejection` with the reason, and the other lines still come out.

A record's external id (:func:`trace_external_id`) is made of what the run's manifests keep, so
the catalog importer derives the same id from a catalog run (:func:`external_id_of`): a trace
imported from both sources has one id, and the ledger tells "unchanged" from "changed".
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.documents import parse_json
from domain.errors import DomainError
from domain.importers.catalog_form import checked, json_artifact, manifest, utc_millis
from domain.importers.fields import RECORD_ERRORS, MappingError, as_object, reason, text
from domain.importers.fields import field as required_field
from domain.importers.flashinfer_trace.dataset import SOURCE
from domain.importers.flashinfer_trace.definition import operation_spec
from domain.importers.flashinfer_trace.evaluation import PROTOCOL, environment_manifest, run_spec
from domain.importers.flashinfer_trace.solution import implementation_revision
from domain.importers.flashinfer_trace.workload import workload_case
from domain.importers.names import MAX_TITLE, clip, object_name
from domain.importers.records import (
    Artifact,
    ImportRecord,
    Rejection,
    Skipped,
    manifest_artifact,
    referencing,
    workload_artifact,
)
from domain.manifests.canonical_form import manifest_digest


def trace_external_id(definition: str, solution: str, workload_uuid: str, observed_at: str) -> str:
    """The ledger's id of one trace: ``<definition>:<solution>:<uuid[:8]>:<observedAt>``.

    Only what a run's manifests keep goes in (``sourceNative.benchmark``, the implementation's
    title, the workload name's uuid prefix, ``observedAt`` in milliseconds), so that
    :func:`external_id_of` gives the same id for the catalog's copy of the run.
    """
    return f"{definition}:{clip(solution, MAX_TITLE)}:{workload_uuid[:8].lower()}:{observed_at}"


def external_id_of(manifests: Mapping[str, Any]) -> str | None:
    """:func:`trace_external_id` of a FlashInfer run's manifest set (the catalog's, say), or
    None when the set lacks what the id is made of (no implementation or workload, a workload
    name not of the form ``<definition>-<uuid[:8]>``)."""
    run_spec_ = manifests["run"]["spec"]
    native = run_spec_.get("sourceNative") or {}
    definition, observed = native.get("benchmark"), run_spec_.get("observedAt")
    implementation, workload = manifests.get("implementation"), manifests.get("workload")
    if not isinstance(definition, str) or not isinstance(observed, str):
        return None
    if not isinstance(implementation, Mapping) or not isinstance(workload, Mapping):
        return None
    solution = implementation["metadata"].get("title")
    name = workload["metadata"].get("name")
    if not isinstance(solution, str) or not isinstance(name, str):
        return None
    prefix = name.rpartition("-")[2]
    if not re.fullmatch(r"[0-9a-f]{8}", prefix) or object_name(definition, prefix) != name:
        return None
    return trace_external_id(definition, solution, prefix, observed)


@dataclass
class _Documents:
    """The folder's files, sorted into definitions, solutions and trace lines by name."""

    definitions: dict[str, dict[str, Any]] = field(default_factory=dict)
    solutions: dict[str, dict[str, Any]] = field(default_factory=dict)
    traces: list[tuple[str, bytes]] = field(default_factory=list)  # ("<file>#<line>", line)
    unreadable: list[Rejection] = field(default_factory=list)


def _classify(document: object) -> str | None:
    if not isinstance(document, dict):
        return None
    if "sources" in document and "definition" in document:
        return "solution"
    if "op_type" in document or ("axes" in document and "inputs" in document):
        return "definition"
    return None


def _trace_lines(name: str, data: bytes) -> Iterator[tuple[str, bytes]]:
    for number_, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            yield f"{name}#{number_}", line


def _read_documents(files: Mapping[str, bytes]) -> _Documents:
    """``*.jsonl`` files are traces; ``*.json`` files definitions or solutions (by their fields)."""
    documents = _Documents()
    for name in sorted(files):
        data = files[name]
        if name.endswith(".jsonl"):
            documents.traces.extend(_trace_lines(name, data))
            continue
        try:
            document = parse_json(data)
        except DomainError as exc:
            documents.unreadable.append(Rejection(None, f"{name}: {exc.message}"))
            continue
        kind = _classify(document)
        if kind == "definition":
            documents.definitions[str(document.get("name"))] = document
        elif kind == "solution":
            documents.solutions[str(document.get("name"))] = document
        else:
            documents.unreadable.append(
                Rejection(None, f"{name}: neither a FlashInfer definition nor a solution")
            )
    return documents


class _Operations:
    """Each definition's ``OperationSpec`` and its digest, mapped once on first use (or the
    reason it cannot be, which every trace of that definition then reports)."""

    def __init__(self, definitions: Mapping[str, dict[str, Any]], revision: str | None) -> None:
        self._definitions = definitions
        self._revision = revision
        self._mapped: dict[str, tuple[dict[str, Any], str] | str] = {}

    def get(self, definition_name: str) -> tuple[dict[str, Any], str]:
        if definition_name not in self._mapped:
            self._mapped[definition_name] = self._map(definition_name)
        found = self._mapped[definition_name]
        if isinstance(found, str):
            raise MappingError(found)
        return found

    def _map(self, definition_name: str) -> tuple[dict[str, Any], str] | str:
        if definition_name not in self._definitions:
            return f"definition {definition_name!r} is not among the files"
        try:
            op = operation_spec(self._definitions[definition_name], self._revision)
            return op, manifest_digest(op)
        except RECORD_ERRORS as exc:
            return f"definition {definition_name}: {reason(exc)}"


def map_flashinfer_trace(
    files: Mapping[str, bytes], *, dataset_revision: str | None = None
) -> Iterator[ImportRecord | Rejection]:
    """One record per trace line of ``files`` (name → bytes), or a rejection saying why.

    ``*.jsonl`` files are traces; ``*.json`` files are definitions or solutions (told apart by
    their fields); files without a trace give one :class:`Skipped` saying so.
    ``dataset_revision`` is the 40-hex commit of ``flashinfer-trace`` the files come from,
    pinned in every implementation (the catalog pins ``da915083d4c7c5e61aa3005e3d17ae488e0fc71c``).
    Deterministic: the same files give the same records, in file-name then line order.
    """
    if dataset_revision is not None and not re.fullmatch(r"[0-9a-f]{40}", dataset_revision):
        raise ValueError("dataset_revision must be a 40-hex git commit")
    documents = _read_documents(files)
    yield from documents.unreadable
    operations = _Operations(documents.definitions, dataset_revision)
    if not documents.traces:
        yield Skipped(
            None,
            f"no trace (*.jsonl) among the files: {len(documents.definitions)} definition(s) and "
            f"{len(documents.solutions)} solution(s) hold no result, so there is no run to import",
        )
    for where, line in documents.traces:
        yield _trace_line(where, line, documents, operations, dataset_revision)


def _trace_line(
    where: str,
    line: bytes,
    documents: _Documents,
    operations: _Operations,
    revision: str | None,
) -> ImportRecord | Rejection:
    """One trace line as a record, or a rejection naming the trace as far as it was read."""
    external_id: str | None = None
    try:
        trace = as_object(parse_json(line), "trace")
        definition_name = text(trace.get("definition"), "trace.definition")
        solution_name = text(trace.get("solution"), "trace.solution")
        raw_workload = as_object(required_field(trace, "workload", "trace"), "trace.workload")
        evaluation = as_object(required_field(trace, "evaluation", "trace"), "trace.evaluation")
        uuid = text(raw_workload.get("uuid"), "trace.workload.uuid")
        timestamp = text(evaluation.get("timestamp"), "trace.evaluation.timestamp")
        external_id = f"{definition_name}:{solution_name}:{uuid}:{timestamp}"  # for reasons
        external_id = trace_external_id(
            definition_name,
            solution_name,
            uuid,
            utc_millis(timestamp, "trace.evaluation.timestamp"),
        )
        return _map_trace(
            trace,
            where,
            external_id,
            documents.definitions.get(definition_name, {}),
            operations.get(definition_name),
            documents.solutions.get(solution_name),
            revision,
        )
    except RECORD_ERRORS as exc:
        return Rejection(external_id, f"{where}: {reason(exc)}")


def _log_evidence(evaluation: Mapping[str, Any]) -> Artifact | None:
    """The evaluation log as a text artifact, when the trace carries one."""
    log = evaluation.get("log")
    if not log:
        return None
    return Artifact(text(log, "evaluation.log").encode("utf-8"), "text/plain", "log")


def _map_trace(
    trace: dict[str, Any],
    where: str,
    external_id: str,
    definition: dict[str, Any],
    operation: tuple[dict[str, Any], str],
    solution: dict[str, Any] | None,
    revision: str | None,
) -> ImportRecord:
    op, op_digest = operation
    definition_name = definition["name"]
    solution_name = trace["solution"]
    if solution is None:
        raise MappingError(f"solution {solution_name!r} is not among the files")
    if solution.get("definition") != definition_name:
        raise MappingError(f"solution {solution_name} implements {solution.get('definition')!r}")
    evaluation = trace["evaluation"]
    spec = run_spec(evaluation, definition_name)
    environment = environment_manifest(
        as_object(required_field(evaluation, "environment", "evaluation"), "evaluation.environment")
    )
    # What a rerun fetches: the solution document (the implementation's source is only its
    # entry file) and the definition with this trace's workload, each named by the manifest.
    solution_document = json_artifact(solution, f"solution:{solution_name}")
    rerun_workload = workload_artifact(definition, [trace["workload"]])
    workload = referencing(
        workload_case(definition, op, op_digest, trace["workload"]), rerun_workload
    )
    implementation, sources = implementation_revision(solution, op, op_digest, revision)
    implementation = referencing(implementation, solution_document)
    artifacts = [
        json_artifact(definition, f"definition:{definition_name}"),
        manifest_artifact(op),  # what the operation's page explains it from
        solution_document,
        rerun_workload,
        *sources,
    ]
    log = _log_evidence(evaluation)
    if log is not None:
        artifacts.append(log)
        spec["evidence"] = {
            "logs": {"uri": f"kernelindex:artifact/{log.digest}", "digest": log.digest}
        }
    protocol = copy.deepcopy(dict(PROTOCOL))
    spec.update(
        {
            "implementationDigest": manifest_digest(implementation),
            "workloadDigest": manifest_digest(workload),
            "protocolDigest": manifest_digest(protocol),
            "environmentDigest": manifest_digest(environment),
        }
    )
    run = manifest(
        "BenchmarkRun",
        {
            "name": object_name("sol-trace", definition_name, trace["workload"]["uuid"][:8]),
            "title": clip(f"{solution_name} · {definition_name}", MAX_TITLE),
        },
        spec,
    )
    return checked(
        ImportRecord(
            source=SOURCE,
            external_id=external_id,
            manifests={
                "run": run,
                "protocol": protocol,
                "environment": environment,
                "implementation": implementation,
                "workload": workload,
            },
            snapshot=json_artifact(trace, where),
            artifacts=tuple(artifacts),
        )
    )
