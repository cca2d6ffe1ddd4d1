"""The operator's maintenance of a ledger's database: its schema (status, upgrade), the read
models' tables (made, rebuilt, folded batch by batch) and the log's sequencing and signing.

The schema's calls take a database URL, not a ledger: the schema they read may be missing
or from another release, which opening a ledger would refuse. The rest is ``Admin``, over
the service's own views (``LedgerService.admin``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

from api.service.models.admin import FoldStep, RebuildReport, SchemaReport, ViewsStatus
from ledger.store.schema import SchemaStatus, read_status, upgrade
from projections.runner import DEFAULT_BATCH
from projections.runner import prepare_views as _prepare_views

if TYPE_CHECKING:
    # Only its type: the schema's calls (``kernelindex db``) load no ledger stack.
    from api.service.freshness import Views

__all__ = ["DEFAULT_BATCH", "Admin", "Rebuilt", "prepare_views", "schema_status", "upgrade_schema"]


def shown_url(url: str) -> str:
    """A database URL as it may be printed: its password hidden."""
    return make_url(url).render_as_string(hide_password=True)


def _report(url: str, status: SchemaStatus, applied: list[int] | None = None) -> SchemaReport:
    report = SchemaReport(
        database=shown_url(url),
        version=status.version,
        required=status.required,
        current=status.current,
        upgraded_at=status.upgraded_at,
        software=status.software,
    )
    if applied is not None:
        report.applied = applied
    return report


def schema_status(url: str) -> SchemaReport:
    """The schema version the database holds, and whether this build can use it."""
    return _report(url, read_status(url))


def upgrade_schema(url: str) -> SchemaReport:
    """Create the schema, or bring it to this build's version, with the read models' own
    tables (idempotent)."""
    status, applied = upgrade(url)
    _prepare_views(url)  # the read models' tables (projections.tables.VIEWS_VERSION)
    return _report(url, status, applied)


def prepare_views(url: str) -> bool:
    """Make the read models' tables of a new ledger (``init``): True when made anew."""
    return _prepare_views(url)


@dataclass(frozen=True)
class Rebuilt:
    """A rebuild's report, and the tables' digests before it (which tables it changed)."""

    report: RebuildReport
    before: dict[str, str]


class Admin:
    def __init__(self, views: Views) -> None:
        self.views = views
        self.ledger = views.ledger
        self.runner = views.runner

    def log_position(self) -> int:
        """The position of the newest stored event (how far a rebuild folds)."""
        return self.ledger.store.last_position()

    def rebuild(self, progress: Callable[[int], None] | None = None) -> Rebuilt:
        """Drop every read model and refold it from the events (``progress``: the position
        folded so far). Views another build made (another VIEWS_VERSION) are replaced by
        this build's first: their old tables are not this build's to read or compare."""
        self.runner.ensure_views()
        before = self.runner.table_digests()
        started = time.perf_counter()
        done = self.runner.rebuild(progress=progress)
        elapsed = time.perf_counter() - started
        after = self.runner.table_digests()
        report = RebuildReport(
            events=done.events,
            seconds=round(elapsed, 3),
            events_per_second=round(done.events / elapsed) if elapsed > 0 else None,
            tables=after,
            identical_to_incremental=before == after,
        )
        return Rebuilt(report, before)

    def views_status(self) -> ViewsStatus:
        """Fold what is new, then how far the views are and their tables' digests."""
        done = self.runner.catch_up()
        return ViewsStatus(
            folded=done.events, position=done.position, tables=self.runner.table_digests()
        )

    def fold(self, batch: int = DEFAULT_BATCH) -> FoldStep:
        """Fold one batch of new events into the views (the projector's step)."""
        done = self.runner.catch_up(batch=batch, max_batches=1)
        return FoldStep(events=done.events, position=done.position)

    def sequence(self) -> int:
        """Sequence the events stored without a log leaf; how many were."""
        return self.ledger.tlog.catch_up()

    def can_sign(self) -> bool:
        """Whether this ledger holds the log key (it signs checkpoints)."""
        return self.ledger.tlog.can_sign

    def sign_checkpoint(self) -> int:
        """Sign (and store) the checkpoint of the current tree if it is not; its size."""
        return self.ledger.tlog.sign_checkpoint().size
