"""One SOL-ExecBench definition, mapped whole: its operation, workload cases and suite.

Shared by the folder importer (a folder's ``definition.json``) and the leaderboard importer
(a kernel, which carries its workloads), and by direct submissions (:mod:`ledger.submission`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from domain.errors import DomainError
from domain.importers.sol_execbench.fields import JsonObject, json_object, required_string
from domain.importers.sol_execbench.operation import operation_from_definition
from domain.importers.sol_execbench.workload import (
    case_from_entry,
    suite_from_entries,
    workload_entry_key,
)
from domain.manifests.canonical_form import manifest_digest


@dataclass(frozen=True)
class MappedDefinition:
    """A definition's operation, its workload cases and (when it has workloads) its suite."""

    name: str
    operation: JsonObject
    operation_digest: str
    cases: tuple[JsonObject, ...]
    case_digests: Mapping[str, str]  # workload entry key → case digest
    suite: JsonObject | None
    suite_digest: str | None
    problems: tuple[str, ...] = field(default=())  # entries that could not become cases


def map_definition(
    definition: Mapping[str, Any],
    entries: Sequence[Mapping[str, Any]],
    *,
    source_url: str | None = None,
    with_suite: bool = True,
) -> MappedDefinition:
    """Operation, cases and suite of one definition; every manifest validated and digested.

    Raises a :class:`DomainError` when the operation (or, with ``with_suite``, the suite) cannot
    be built; a single entry that cannot become a case is listed in ``problems`` instead.
    """
    name = required_string(definition, "name", "definition")
    operation = operation_from_definition(definition, source_url=source_url)
    operation_digest = manifest_digest(operation)
    cases: list[JsonObject] = []
    case_digests: dict[str, str] = {}
    problems: list[str] = []
    for index, raw in enumerate(entries):
        try:
            entry = json_object(raw, f"workload #{index + 1}")
            case = case_from_entry(definition, operation_digest, entry)
            digest = manifest_digest(case)
        except DomainError as exc:
            problems.append(f"workload #{index + 1}: {exc.message}")
            continue
        cases.append(case)
        case_digests[workload_entry_key(entry)] = digest
    suite = suite_digest = None
    if with_suite:
        suite = suite_from_entries(definition, operation_digest, entries)
        suite_digest = manifest_digest(suite)
    return MappedDefinition(
        name=name,
        operation=operation,
        operation_digest=operation_digest,
        cases=tuple(cases),
        case_digests=case_digests,
        suite=suite,
        suite_digest=suite_digest,
        problems=tuple(problems),
    )
