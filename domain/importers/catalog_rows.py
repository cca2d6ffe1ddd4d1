"""What a kept KernelIndex catalog row says that a reader of the run needs: when the catalog
published it. Apart from the catalog's importer (``kernelindex_catalog``), which writes the
rows, so that reading a run loads no importer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from domain.documents import parse_json
from domain.errors import DomainError
from domain.timestamps import format_time, parse_time

RUN_TABLE: Final = "benchmark_runs"
# The name a catalog run's kept row is stored under: the table, a colon, the row's id.
RUN_SNAPSHOT_PREFIX: Final = f"{RUN_TABLE}:"


def published_at(row: Mapping[str, Any]) -> str | None:
    """When the catalog published the run (``publishedAt``), in the ledger's form; a value
    that is no RFC 3339 time refuses the row (a ``DomainError`` saying so)."""
    published = row.get("publishedAt")
    return None if published is None else format_time(parse_time(published, "publishedAt"))


def published_in_snapshot(name: str | None, content: bytes) -> str | None:
    """The publication time the kept row of a catalog run states (the snapshot its ingestion
    names by digest), for runs ingested before the ingestion carried ``publishedAt``; None
    for any other snapshot, or a row that states none or no time."""
    if not (name or "").startswith(RUN_SNAPSHOT_PREFIX):
        return None
    try:
        row = parse_json(content)
        return published_at(row) if isinstance(row, dict) else None
    except DomainError:
        return None
