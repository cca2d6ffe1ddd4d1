"""The typed rows the read door (``projections.queries``) answers with, one class per kind.

Each is built from its SQL row by ``from_mapping`` alone, field by field by name, so a
column a query stops selecting fails loudly there instead of as a missing key in a page.
Field order is the query's column order: ``dataclasses.asdict`` of a row gives the JSON
the dict rows gave (the CLI prints it). ``projections.view_rows`` is the write side.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Self


def json_list(text: str) -> list[str]:
    """A JSON list of strings as the views store it (anything else reads as empty)."""
    value = json.loads(text)
    return [str(v) for v in value] if isinstance(value, list) else []


def _named(cls: type[Any], row: Mapping[Any, Any]) -> dict[str, Any]:
    """The values of ``cls``'s fields from a SQL row, by column name (``RowMapping`` keys
    are not only strings, hence ``Any``); columns it does not declare are left out."""
    return {f.name: row[f.name] for f in fields(cls)}


@dataclass(frozen=True, slots=True)
class _Row:
    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> Self:
        return cls(**_named(cls, row))

    @classmethod
    def from_values(cls, row: Sequence[Any]) -> Self:
        """From a generated statement's row (``projections.view_queries``), which selects
        the fields' columns in their order."""
        if len(row) != len(fields(cls)):
            raise ValueError(f"{cls.__name__}: {len(row)} columns for {len(fields(cls))} fields")
        return cls(*row)


@dataclass(frozen=True, slots=True)
class RunRow(_Row):
    """Every column of the runs view, in table order; ``evidence_reasons`` decoded."""

    run_digest: str
    name: str
    title: str | None
    source: str
    external_id: str | None
    benchmark: str | None
    status: str
    comparison_key: str | None
    metric: str
    statistic: str | None
    unit: str | None
    claimed: float | None
    product: str | None
    architecture: str | None
    observed_at: str | None
    protocol_digest: str | None
    environment_digest: str | None
    workload_digest: str | None
    author: str | None
    implementation_digest: str | None
    ingested_position: int
    ingested_at: str
    retracted: bool
    superseded_by: str | None
    attestations: int
    reruns: int
    evidence_level: str
    evidence_order: int
    evidence_reasons: list[str]
    evidence_caused_by: int
    policy_version: str
    rerun_median_ns: float | None
    rerun_ci95_low: float | None
    rerun_ci95_high: float | None
    last_position: int

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> Self:
        # The view stores the reasons as JSON text; readers want the list. A driver's row
        # (``from_values``) gives SQLite's boolean as the integer it stores.
        return cls(
            **_named(cls, row)
            | {
                "evidence_reasons": json_list(row["evidence_reasons"]),
                "retracted": bool(row["retracted"]),
            }
        )

    @classmethod
    def from_values(cls, row: Sequence[Any]) -> Self:
        return cls.from_mapping(dict(zip((f.name for f in fields(cls)), row, strict=True)))


@dataclass(frozen=True)
class Standing:
    """A run's place in one view of its group's ranking."""

    view: str
    rank: int
    of: int
    value: float
    tied_with: list[str]

    @property
    def label(self) -> str:
        return f"Rank {self.rank} of {self.of} in its comparison group · {self.view} comparison"


@dataclass(frozen=True, slots=True)
class BoardRow(_Row):
    """One ranked run of a leaderboard: its place in the view, and what a board shows of it.
    ``tied_with`` is the JSON text the ranks view stores (the CLI's JSON prints it so)."""

    rank: int
    of_count: int
    value: float
    tied_with: str
    run_digest: str
    name: str
    title: str | None
    source: str
    external_id: str | None
    evidence_level: str
    evidence_order: int
    metric: str
    statistic: str | None
    unit: str | None
    claimed: float | None
    rerun_median_ns: float | None
    author: str | None

    @property
    def tied_runs(self) -> list[str]:
        """The digests of the runs sharing this rank."""
        return json_list(self.tied_with)


@dataclass(frozen=True, slots=True)
class GroupRow(_Row):
    """A comparison group with what its runs were measured as, and how many there are."""

    comparison_key: str
    benchmark: str | None
    product: str | None
    metric: str
    statistic: str | None
    unit: str | None
    runs: int


@dataclass(frozen=True, slots=True)
class OperationRow(_Row):
    """An operation (benchmark or definition) with its runs, groups and GPUs."""

    benchmark: str
    runs: int
    groups: int
    gpus: int


@dataclass(frozen=True, slots=True)
class OperationGroupRow(_Row):
    """One comparison group of an operation with its #1 (source-native); the ``top_``
    fields are None while nothing in the group is ranked."""

    comparison_key: str
    product: str | None
    metric: str
    statistic: str | None
    unit: str | None
    runs: int
    top_run: str | None
    top_value: float | None
    top_name: str | None


@dataclass(frozen=True, slots=True)
class SourceRow(_Row):
    """A source with how many runs it gave."""

    source: str
    runs: int


@dataclass(frozen=True, slots=True)
class RecentRunRow(_Row):
    """What the list of newest runs shows of one."""

    run_digest: str
    name: str
    title: str | None
    source: str
    benchmark: str | None
    product: str | None
    claimed: float | None
    unit: str | None
    evidence_level: str
    retracted: bool
    ingested_at: str
    ingested_position: int


@dataclass(frozen=True, slots=True)
class GroupHeading(_Row):
    """Benchmark, GPU and metric of one comparison group, with its number of runs."""

    benchmark: str | None
    product: str | None
    metric: str
    statistic: str | None
    unit: str | None
    runs: int


@dataclass(frozen=True, slots=True)
class RunNames(_Row):
    """A run's name and title (both None for a run the views do not hold)."""

    name: str | None
    title: str | None


@dataclass(frozen=True, slots=True)
class RunListRow(_Row):
    """What the runs list shows of each run; ``queries.RUN_LIST_COLUMNS`` selects these."""

    run_digest: str
    name: str
    title: str | None
    source: str
    external_id: str | None
    benchmark: str | None
    status: str
    comparison_key: str | None
    metric: str
    claimed: float | None
    unit: str | None
    product: str | None
    evidence_level: str
    retracted: bool
    superseded_by: str | None
    attestations: int
    ingested_at: str
    ingested_position: int
