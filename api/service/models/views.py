"""Replies from the projected read models: groups, operations, leaderboards, compare (search's
are ``api.service.models.search``)."""

from __future__ import annotations

from typing import Any

from api.service.models import ApiModel, Number


class GroupSummary(ApiModel, kw_only=True):
    """A comparison group: runs measured alike (operation, workload, stack, GPU, metric)."""

    comparison_key: str
    benchmark: str | None
    gpu: str | None
    metric: str
    statistic: str | None
    unit: str | None
    runs: int


class OperationSummary(ApiModel, kw_only=True):
    operation: str
    runs: int
    groups: int
    gpus: int


class GroupTop(ApiModel, kw_only=True):
    """A group's #1 (source-native)."""

    run: str | None
    name: str | None
    value: Number | None


class OperationGroup(ApiModel, kw_only=True):
    comparison_key: str
    gpu: str | None
    metric: str
    statistic: str | None
    unit: str | None
    runs: int
    parts: dict[str, str]  # part of the comparison key -> its readable name
    apart_by: str | None  # what sets it apart from the groups that look like it
    apart_short: str | None  # the same in a few words, for a chart label
    top: GroupTop


class Operation(ApiModel, kw_only=True):
    operation: str
    gpus: list[str]
    stacks: list[str]
    groups: list[OperationGroup]


class BoardEntry(ApiModel, kw_only=True):
    rank: int
    of: int
    run: str
    name: str
    title: str | None
    source: str
    external_id: str | None
    evidence_level: str
    value: Number
    unit: str | None
    metric: str
    statistic: str | None
    claimed: Number | None
    rerun_median_ns: Number | None
    author: str | None
    tied_with: list[str]
    ratio_to_first: Number | None


class Leaderboard(ApiModel, kw_only=True):
    """A page of a group's ranking: ``entries`` from the ``start``-th (1-based)."""

    comparison_key: str
    view: str
    min_level: str | None
    total: int
    start: int
    next: int | None  # where the next page starts; None: this is the last
    entries: list[BoardEntry]


class Difference(ApiModel, kw_only=True):
    """A manifest field that differs: its value in a and in b (None too when absent)."""

    path: str
    a: Any
    b: Any
    in_a: bool
    in_b: bool


class RunComparison(ApiModel, kw_only=True):
    """Two runs' differences and the ratio a ÷ b of their primary values."""

    a: str
    b: str
    comparable: bool  # in one comparison group: the ratio means something
    not_comparable_by: str | None  # else the part of the comparison key that separates them
    ratio: Number | None
    metric: str
    differences: list[Difference]


class PrimaryValue(ApiModel, kw_only=True):
    metric: str
    statistic: str | None
    unit: str | None
    value: Number | None


class ComparedRun(ApiModel, kw_only=True):
    run: str
    name: str | None
    primary: PrimaryValue
    ratio_to_first: Number | None
    comparable_with_first: bool


class FieldValues(ApiModel, kw_only=True):
    path: str
    values: list[Any]  # one per run, in order (None: the run lacks the field)


class Comparison(ApiModel, kw_only=True):
    """2 to 8 runs side by side, and every manifest field that is not the same in all."""

    runs: list[ComparedRun]
    comparable: bool
    not_comparable_by: str | None
    differences: list[FieldValues]
