"""KernelBot submission rows → one record per benchmark case of each ranked run (the mapper).

A row of a ranked (``run_mode: leaderboard``), passed run yields its cases' records
(:mod:`.case`), all on one protocol, one environment (the runner GPU) and one
implementation, ``kernelbot-submission-<id>``, whose source is pinned by digest when the
row carries its complete code.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from domain.documents import parse_json
from domain.errors import DomainError
from domain.importers.catalog_form import file_artifact, json_artifact, manifest, utc_millis
from domain.importers.fields import (
    RECORD_ERRORS,
    MappingError,
    as_object,
    integer,
    numeric_text,
    reason,
    text,
)
from domain.importers.gpumode.case import SubmissionRun, case_record
from domain.importers.gpumode.dataset import DATASET_URL, RANKED_RUN_MODE, kernelbot_external_id
from domain.importers.gpumode.pages import Leaderboard, rows, unwrap
from domain.importers.gpumode.problems import KNOWN_LEADERBOARD_IDS, KNOWN_PROBLEMS, Problem
from domain.importers.gpumode.runner import EVAL_PROTOCOL, environment_manifest
from domain.importers.names import MAX_DESCRIPTION, MAX_TITLE, clip, object_name
from domain.importers.operations import input_dtypes
from domain.importers.records import Artifact, ImportRecord, Rejection, Skipped
from domain.manifests.canonical_form import manifest_digest


def _implementation(
    row: Mapping[str, Any],
    truncated: tuple[str, ...],
    submission: int,
    leaderboard: str,
    problem: Problem,
    operation_digest: str,
    environment: Mapping[str, Any],
) -> tuple[dict[str, Any], tuple[Artifact, ...]]:
    file_name = row.get("file_name")
    file_name = file_name if isinstance(file_name, str) and file_name else "submission.py"
    language = "cuda" if file_name.endswith((".cu", ".cuh")) else "python"
    hardware = environment["spec"]["hardware"]
    spec: dict[str, Any] = {
        "support": {
            "dtypes": input_dtypes(problem.operation),
            "productsTested": [hardware["product"]],
            "hardwareArchitectures": [hardware["architecture"]],
        },
        "callable": {"language": language},
        "licensing": {},
        "operation": {"specDigest": operation_digest},
        "projectRevision": {"version": f"submission-{submission}"},
    }
    artifacts: tuple[Artifact, ...] = ()
    code = row.get("code")
    # Only complete code pins the implementation; a truncated cell would pin the wrong bytes.
    if isinstance(code, str) and code and "code" not in truncated:
        artifact = file_artifact(code.encode("utf-8"), file_name)
        spec["source"] = {
            "fileName": file_name,
            "sizeBytes": len(artifact.content),
            "contentDigest": artifact.digest,
        }
        artifacts = (artifact,)
    metadata = {
        "name": object_name("kernelbot-submission", str(submission)),
        "title": clip(f"{leaderboard} · submission {submission}", MAX_TITLE),
        "sourceRefs": [{"url": DATASET_URL}],
        "description": clip(file_name, MAX_DESCRIPTION),
    }
    return manifest("ImplementationRevision", metadata, spec), artifacts


def map_gpumode(
    data: bytes, name: str, *, leaderboards: Mapping[int, Leaderboard] | None = None
) -> Iterator[ImportRecord | Rejection]:
    """One record per benchmark case of each ranked submission run in ``data``, or a rejection.

    ``name`` names the document (used in artifact names and reasons). ``leaderboards``
    (from :func:`~domain.importers.gpumode.pages.parse_leaderboards`) maps leaderboard ids to
    names; without it the ids of :data:`~domain.importers.gpumode.problems.KNOWN_LEADERBOARD_IDS`
    are used. A leaderboard listing yields nothing.
    """
    try:
        items = rows(parse_json(data), name)
    except DomainError as exc:
        yield Rejection(None, f"{name}: {exc.message}")
        return
    if not items:
        yield Skipped(None, f"{name}: no rows, so there is no run to import")
    for index, item in enumerate(items):
        where = f"{name}#rows[{index}]"
        submission_ref: str | None = None
        try:
            row, truncated = unwrap(item, where)
            if "leaderboard_id" not in row and "gpu_types" in row:
                yield Skipped(
                    f"leaderboard/{row.get('id')}",
                    f"{where}: leaderboard {row.get('name')!r} is a leaderboard, not a "
                    "submission result, so there is no run to import (a leaderboard listing "
                    "names leaderboard ids when given as leaderboards)",
                )
                continue
            submission = integer(row.get("submission_id"), f"{where}.submission_id")
            submission_ref = f"submission/{submission}"
            board_id = integer(row.get("leaderboard_id"), f"{where}.leaderboard_id")
            board = leaderboards.get(board_id) if leaderboards is not None else None
            board_name = board.name if board is not None else KNOWN_LEADERBOARD_IDS.get(board_id)
            if board_name is None:
                raise MappingError(
                    f"leaderboard {board_id} is unknown (pass the leaderboard table)"
                )
            yield from _map_row(row, truncated, where, submission, board_name, board)
        except RECORD_ERRORS as exc:
            yield Rejection(submission_ref, f"{where}: {reason(exc)}")


def _ranked_problem(row: Mapping[str, Any], leaderboard: str) -> Problem:
    """The row's problem, once the row is known to be a ranked run that passed."""
    problem = KNOWN_PROBLEMS.get(leaderboard)
    if problem is None:
        raise MappingError(
            f"leaderboard {leaderboard!r} has no known OperationSpec; "
            f"known: {', '.join(sorted(KNOWN_PROBLEMS))}"
        )
    mode = row.get("run_mode")
    if mode != RANKED_RUN_MODE:
        raise MappingError(f"run_mode {mode!r} is not a ranked leaderboard run")
    passed = row.get("run_passed")
    if passed is not True:
        if passed is False:
            raise MappingError(
                "run_passed is false: KernelBot does not say how the run failed, and no "
                "BenchmarkRun status fits without guessing"
            )
        raise MappingError(f"run_passed must be true or false, got {passed!r}")
    return problem


def _map_row(
    row: dict[str, Any],
    truncated: tuple[str, ...],
    where: str,
    submission: int,
    leaderboard: str,
    board: Leaderboard | None,
) -> Iterator[ImportRecord | Rejection]:
    problem = _ranked_problem(row, leaderboard)
    observed_at = utc_millis(row.get("submission_time"), f"{where}.submission_time")
    result = as_object(row.get("run_result"), f"{where}.run_result")
    count = integer(
        numeric_text(result.get("benchmark-count"), "benchmark-count"), "benchmark-count"
    )
    if count == 0:
        raise MappingError("run_result has no benchmark cases")
    system = as_object(row.get("run_system_info") or {}, f"{where}.run_system_info")
    gpu = text(system.get("gpu"), f"{where}.run_system_info.gpu")
    environment = environment_manifest(gpu)
    environment_digest = manifest_digest(environment)
    protocol = copy.deepcopy(dict(EVAL_PROTOCOL))
    protocol_digest = manifest_digest(protocol)
    operation_digest = manifest_digest(problem.operation)
    implementation, code = _implementation(
        row, truncated, submission, leaderboard, problem, operation_digest, environment
    )
    implementation_digest = manifest_digest(implementation)
    run = SubmissionRun(
        where=where,
        submission=submission,
        leaderboard=leaderboard,
        problem=problem,
        operation_digest=operation_digest,
        observed_at=observed_at,
        result=result,
        score=row.get("run_score"),
        labels={
            key: clip(value, MAX_TITLE)
            for key in ("torch", "platform")
            if isinstance(value := system.get(key), str) and value
        },
        protocol=protocol,
        protocol_digest=protocol_digest,
        environment=environment,
        environment_digest=environment_digest,
        implementation=implementation,
        implementation_digest=implementation_digest,
        snapshot=json_artifact(row, f"{where}:submission-{submission}"),
        artifacts=(
            *((json_artifact(board.row, f"leaderboard:{board.name}"),) if board else ()),
            *code,
        ),
    )
    for case in range(count):
        external_id = kernelbot_external_id(
            f"submission/{submission}", f"{leaderboard}/{case}", environment["metadata"]["name"]
        )
        try:
            yield case_record(run, case, external_id)
        except RECORD_ERRORS as exc:
            yield Rejection(external_id, f"{where} case {case}: {reason(exc)}")
