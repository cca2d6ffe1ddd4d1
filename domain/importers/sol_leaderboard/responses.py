"""The saved leaderboard API responses → one record per submission (the mapper).

Reads ``kernel-<id>.json`` (a kernel with its whole definition and workloads) and
``submissions*.json`` (pages of submissions); ``kernels.json``, the listing, holds no results.
A submission's record is its run, the stack's protocol and environment, its implementation
and its kernel's workload suite; the snapshot is the submission in canonical JSON, and the
kernel definition it was mapped with travels as an artifact, so the mapping can be re-run
from stored bytes.
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
from domain.importers.sol_execbench.definition import MappedDefinition, map_definition
from domain.importers.sol_execbench.fields import SolFormatError
from domain.importers.sol_execbench.vocabulary import SOURCE
from domain.importers.sol_leaderboard.fields import (
    json_object,
    non_negative_id,
    required,
    required_string,
)
from domain.importers.sol_leaderboard.stack import leaderboard_environment, leaderboard_protocol
from domain.importers.sol_leaderboard.submission import (
    implementation_from_submission,
    run_from_submission,
)
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.manifest_set import check_manifest_set

KERNELS_URL: Final = "https://research.nvidia.com/benchmarks/sol-execbench/api/kernels"
_KERNEL_FILE: Final = re.compile(r"kernel-(\d+)\.json")
_SUBMISSIONS_FILE: Final = re.compile(r"submissions.*\.json")


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
    definition = json_object(_data(parse_json(data)), file_name)
    stated = definition.get("id")
    if stated is not None and stated != kernel_id:
        raise SolFormatError(f"{file_name} holds kernel {stated!r}, not kernel {kernel_id}")
    workloads = definition.get("workloads")
    if not isinstance(workloads, list):
        raise SolFormatError(f"{file_name}: 'workloads' must be an array")
    entries = [json_object(w, f"{file_name}: workloads[{i}]") for i, w in enumerate(workloads)]
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
    submission_id = non_negative_id(required(submission, "id"), "submission 'id'")
    kernel_id = non_negative_id(required(submission, "kernel_id"), "submission 'kernel_id'")
    kernel = kernels.get(kernel_id)
    if kernel is None:
        raise SolFormatError(f"kernel-{kernel_id}.json, the definition it ran on, is not given")
    if isinstance(kernel, str):
        raise SolFormatError(f"its kernel cannot be mapped: {kernel}")
    kernel_name = required_string(submission, "kernel_name")
    if kernel_name != kernel.mapped.name:
        raise SolFormatError(
            f"submission is for '{kernel_name}', but kernel {kernel_id} is '{kernel.mapped.name}'"
        )
    assert kernel.mapped.suite is not None and kernel.mapped.suite_digest is not None
    stack_version = required_string(submission, "evaluation_stack_version")
    gpu_type = required_string(submission, "gpu_type")
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


def _external_id(raw: object) -> str | None:
    """The id a rejection names: the submission's own, when it states one."""
    raw_id = raw.get("id") if isinstance(raw, Mapping) else None
    return str(raw_id) if isinstance(raw_id, int) and not isinstance(raw_id, bool) else None


class _Seen:
    """Submissions already imported, by id: a repeat is skipped when verbatim (overlapping
    pages), rejected when its content differs."""

    def __init__(self) -> None:
        self._first: dict[int, tuple[bytes, str]] = {}

    def repeat(self, record: ImportRecord, where: str) -> Rejection | None:
        """Why ``record`` is not imported again, or None the first time (it is then kept)."""
        submission_id = int(record.external_id)
        previous = self._first.get(submission_id)
        if previous is None:
            self._first[submission_id] = (record.snapshot.content, where)
            return None
        content, first = previous
        if content != record.snapshot.content:
            return Rejection(
                record.external_id,
                f"{where}: submission {submission_id} appears twice with different content",
            )
        return Skipped(
            record.external_id,
            f"{where}: submission {submission_id} repeats {first} verbatim "
            "(overlapping pages); imported once",
        )


def map_sol_leaderboard(files: Mapping[str, bytes]) -> Iterator[ImportRecord | Rejection]:
    """Every submission in ``submissions*.json`` as a record, or a rejection with its reason.

    Files are read in name order, submissions in page order; a submission repeated verbatim
    (overlapping pages) is imported once (the repeat is :class:`Skipped`), one repeated with
    different content is rejected. Files not read, an empty page and a kernel file that cannot
    be mapped and that no submission names are reported too, each with the reason.
    """
    kernels = _kernels(files)
    seen = _Seen()
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
            where = f"{name} submission #{index + 1}"
            if isinstance(raw, Mapping) and isinstance(raw.get("kernel_id"), int):
                named.add(raw["kernel_id"])
            try:
                record = _record(json_object(raw, where), kernels)
            except DomainError as exc:
                yield Rejection(_external_id(raw), f"{where}: {exc.message}")
                continue
            repeat = seen.repeat(record, where)
            yield record if repeat is None else repeat
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
