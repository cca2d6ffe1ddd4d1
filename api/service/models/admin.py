"""Replies of the operator's maintenance: the database schema and the read models' state."""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from api.service.models import ApiModel


class SchemaReport(ApiModel, kw_only=True):
    """The schema of a database (``kernelindex db status`` / ``upgrade``): its stamped
    ``version`` (null: none), the one this build ``required``, and, after an upgrade, the
    versions ``applied`` (left out of a status)."""

    database: str  # the URL, its password hidden
    version: int | None
    required: int
    current: bool
    upgraded_at: str | None
    software: str | None
    applied: list[int] | UnsetType = UNSET


class RebuildReport(ApiModel, kw_only=True):
    """Every read model dropped and refolded from the events: each table's digest after, and
    whether they equal what the incremental folds had made."""

    events: int
    seconds: float
    events_per_second: int | None
    tables: dict[str, str]
    identical_to_incremental: bool


class ViewsStatus(ApiModel, kw_only=True):
    """How far the read models have folded the log, after folding what was new."""

    folded: int  # events folded by this call
    position: int
    tables: dict[str, str]


class FoldStep(ApiModel, kw_only=True):
    """One batch of the projector: how many events it folded, and the views' position."""

    events: int
    position: int
