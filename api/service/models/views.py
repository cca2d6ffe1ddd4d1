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


class Argument(ApiModel, kw_only=True):
    """An input or output of an operation: a tensor (its dimensions, by axis name or size)
    or a scalar (no shape)."""

    name: str
    dtype: str | None
    shape: list[str | int] | None  # None: a scalar


class Axis(ApiModel, kw_only=True):
    name: str
    role: str  # constant, variable or derived
    value: Any  # the constant's value or the derived axis' expression; None for a variable


class OperationAbout(ApiModel, kw_only=True):
    """What the operation is, from the definition its source published (its OperationSpec):
    description, axes, inputs and outputs, and the reference implementation the source gave."""

    spec_digest: str
    title: str | None
    family: str | None
    description: str | None
    axes: list[Axis]
    inputs: list[Argument]
    outputs: list[Argument]
    reference: str | None  # the reference implementation's language, when the source gave one
    source_url: str | None
    # The reference implementation's code, as the source's definition gives it, where the
    # ledger keeps a definition that maps to this spec, and the artifact it was read from
    # (the spec pins the code's language, not the code: the artifact says where it is from).
    reference_code: str | None = None
    reference_artifact: str | None = None


class Operation(ApiModel, kw_only=True):
    operation: str
    gpus: list[str]
    stacks: list[str]
    about: OperationAbout | None  # None: the ledger holds no definition of it
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
    place: int  # 1-based place in the order shown (``rank`` is the ledger's ranking)
    sol_score: Number | None  # SOL-ExecBench's own score (higher is better), where it gave one
    runs_of_author: int | None  # best per user: the author's runs in the group
    gap_to_next: Number | None  # best per user: the next user's value ÷ this one


class SweepPlace(ApiModel, kw_only=True):
    """Where a comparison group stands in its operation's workload sweep (the groups of one
    operation, GPU, stack and metric that differ only by workload, each ranked alone): its
    workload by name, its place among the sweep's workloads in their order, and their count."""

    workload: str
    position: int
    workloads: int


class BoardGroup(ApiModel, kw_only=True):
    """Which group a leaderboard ranks: its operation and GPU, what its key is made of, what
    sets it apart from the groups that look like it, and how many workloads of the same
    operation, GPU, stack and metric the operation has (a sweep: each workload ranks alone)."""

    benchmark: str | None
    gpu: str | None
    source: str | None
    parts: dict[str, str]
    apart_by: str | None
    sweep_workloads: int
    sweep: SweepPlace | None = None  # None: the group is no sweep's
    description: str | None
    has_sol_score: bool
    has_authors: bool


class Leaderboard(ApiModel, kw_only=True):
    """A page of a group's ranking: ``entries`` from the ``start``-th (1-based) of the order
    ``order`` (``rank``: the ledger's; ``sol-score``: the source's score, best first), every
    ranked run or each author's best (``per_user``)."""

    comparison_key: str
    view: str
    min_level: str | None
    order: str
    per_user: bool
    total: int
    start: int
    next: int | None  # where the next page starts; None: this is the last
    group: BoardGroup | None
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
    not_comparable_field: str | None  # and the field of that part's manifest that differs
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
    not_comparable_field: str | None  # the field of that part's manifest that differs
    differences: list[FieldValues]
