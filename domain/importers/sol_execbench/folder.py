"""Reading a SOL-ExecBench benchmark folder: what it provides to its traces.

A folder holds ``definition.json`` (the operator contract), ``workload.jsonl`` (one concrete
binding of the variable axes per line), ``solution*.json`` (implementations) and optionally
``trace*.jsonl``. Problems in the files are kept as reasons, not raised: a trace that needs
what a file lacks reports it in its rejection, and the others still map.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from domain.documents import parse_json
from domain.errors import DomainError
from domain.importers.records import Artifact, Rejection, definition_artifact
from domain.importers.sol_execbench.definition import MappedDefinition, map_definition
from domain.importers.sol_execbench.fields import json_object
from domain.importers.sol_execbench.solution import MappedSolution, implementation_from_solution
from domain.importers.sol_execbench.workload import workload_entry_key

SOLUTION_FILE: Final = re.compile(r"solution.*\.json")


@dataclass
class Folder:
    """What a benchmark folder provides to its traces, with the reasons for what it lacks."""

    definition: Mapping[str, Any] | None = None
    definition_artifact: Artifact | None = None
    definition_problem: str | None = None
    mapped: MappedDefinition | None = None
    entries: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    solutions: dict[str, MappedSolution] = field(default_factory=dict)
    solution_problems: list[str] = field(default_factory=list)


def parse_object(data: bytes, where: str) -> Mapping[str, Any]:
    return json_object(parse_json(data), where)


def json_lines(data: bytes) -> Iterator[tuple[int, Mapping[str, Any] | DomainError]]:
    """``(line number, object or why the line is not one)`` of each non-blank line."""
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, parse_object(line, "the line")
        except DomainError as exc:
            yield number, exc


def _read_definition(folder: Folder, raw_definition: bytes | None) -> None:
    if raw_definition is None:
        folder.definition_problem = "the folder has no definition.json"
        return
    try:
        folder.definition = parse_object(raw_definition, "definition.json")
        folder.definition_artifact = definition_artifact(folder.definition)
        folder.mapped = map_definition(folder.definition, [], with_suite=False)
    except DomainError as exc:
        folder.definition = None
        folder.definition_problem = f"definition.json: {exc.message}"


def _read_entries(folder: Folder, workloads: bytes) -> None:
    for _, entry in json_lines(workloads):
        if isinstance(entry, Mapping):
            try:
                folder.entries.setdefault(workload_entry_key(entry), entry)
            except DomainError:
                continue  # an unusable line; a trace carries its own workload anyway


def _read_solutions(folder: Folder, files: Mapping[str, bytes]) -> None:
    if folder.definition is None or folder.mapped is None:
        return  # a solution is mapped onto the definition's operation
    for file_name in sorted(n for n in files if SOLUTION_FILE.fullmatch(n)):
        try:
            solution = parse_object(files[file_name], file_name)
            mapped = implementation_from_solution(
                solution, folder.definition, folder.mapped.operation_digest
            )
            # Kept with each solution: the definition its reference code is shown from.
            if folder.definition_artifact is not None:
                mapped = replace(mapped, definition=folder.definition_artifact)
        except DomainError as exc:
            folder.solution_problems.append(f"{file_name}: {exc.message}")
            continue
        if mapped.name in folder.solutions:
            folder.solution_problems.append(f"{file_name}: solution '{mapped.name}' is repeated")
            continue
        folder.solutions[mapped.name] = mapped


def read_folder(files: Mapping[str, bytes], definition: bytes | None = None) -> Folder:
    """The folder's definition, workload entries and solutions, each mapped, or why not."""
    folder = Folder()
    _read_definition(folder, definition if definition is not None else files.get("definition.json"))
    if "workload.jsonl" in files:
        _read_entries(folder, files["workload.jsonl"])
    _read_solutions(folder, files)
    return folder


def map_sol_execbench_solutions(
    files: Mapping[str, bytes], definition: bytes | None = None
) -> Iterator[MappedSolution | Rejection]:
    """Every ``solution*.json`` of a folder as an implementation, or a rejection.

    ``definition`` (the bytes of a ``definition.json``) stands in for the folder's own, for a
    folder of solutions only such as ``reward-hacks/``.
    """
    folder = read_folder(files, definition)
    if folder.definition is None:
        if any(SOLUTION_FILE.fullmatch(n) for n in files):
            yield Rejection(None, f"solutions cannot be mapped: {folder.definition_problem}")
        return
    for problem in folder.solution_problems:
        yield Rejection(None, problem)
    yield from (folder.solutions[name] for name in sorted(folder.solutions))
