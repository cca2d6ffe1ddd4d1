"""Replies of the registry: GPUs, implementations (by author) and the #1 records timeline."""

from __future__ import annotations

from typing import Literal

from api.service.models import ApiModel, Number
from api.service.models.runs import RunSummary


class RecordEvent(ApiModel, kw_only=True):
    """One time a comparison group's #1 changed: the run that took it, the #1 it displaced
    (None: the group's first ranked run), and when. ``at`` is dated as ``dated`` says:
    "observed" is the date the source gave the run (its observedAt, the date the KernelIndex
    catalog dates its record events by), "admitted" the ledger's admission of a run whose
    source gave none. ``admittedAt`` is always the ledger's admission of the run."""

    comparison_key: str
    group: str  # the group's short name ("OPERATION on GPU · what sets it apart")
    group_parts: str  # what the group's key is made of, in words
    run: str
    name: str
    title: str | None
    author: str | None
    gpu: str | None
    source: str
    evidence_level: str  # the run's evidence level now
    value: Number
    unit: str | None
    metric: str
    statistic: str | None
    previous_run: str | None
    previous_name: str | None
    previous_value: Number | None
    factor: Number | None  # previous value ÷ this one: how many times better
    at: str
    dated: Literal["observed", "admitted"]
    admitted_at: str
    position: int  # the run's log position: the cursor of the page after this one
    withdrawn: str | None  # "retracted" / "superseded" since (it stays in the history)
    holds: bool  # the run is its group's #1 now


class RecordTimeline(ApiModel, kw_only=True):
    """Records newest first (by date, then log position); ``next``: the ``before`` of the
    next (older) page, None on the last."""

    comparison_key: str | None
    group: str | None  # the group's short name, when the timeline is of one group
    newest: str | None  # the date of the newest record of the whole timeline (of its scope)
    items: list[RecordEvent]
    next: int | None


class RegistrySummary(ApiModel, kw_only=True):
    """A GPU (as the runs name it: their environment's product) or an implementation's
    author (as its manifest names them: ``metadata.authors``), with what the runs hold."""

    name: str
    runs: int
    groups: int
    operations: int
    gpus: int
    authors: int
    records: int  # records set by these runs (times one took a group's #1)
    holds: int  # groups whose #1 now is one of these runs


class ImplementationList(ApiModel, kw_only=True):
    total: int
    start: int
    next: int | None  # the ``start`` of the next page; None: this is the last
    unnamed_runs: int  # runs whose implementation names no author (not listed)
    items: list[RegistrySummary]


class ProjectList(ApiModel, kw_only=True):
    """The projects the imported KernelIndex catalogs name that hold runs, most runs first
    (a project is the catalog's: its implementations' rows name it). ``named``: how many
    projects the catalogs name in all, with runs or not."""

    total: int
    start: int
    next: int | None  # the ``start`` of the next page; None: this is the last
    named: int
    items: list[RegistrySummary]


class RegistryPage(ApiModel, kw_only=True):
    """One GPU's or one author's runs (a page, in log order) and records (a page, newest
    first): ``runsNext`` is the cursor of the runs' next page, ``records.next`` the
    ``before`` of the records' next page."""

    kind: Literal["gpu", "implementation", "project"]
    name: str
    summary: RegistrySummary
    runs: list[RunSummary]
    runs_next: str | None
    records: RecordTimeline
