"""Exports anyone can mirror and check: bundles for ``kernelindex verify`` and the registry
as JSON Lines.

What a bundle holds is named by one rule for every face (``ExportScope.of``): runs as
``show`` names them, a group as ``leaderboard`` does (a key or a unique prefix); an
ambiguous name is refused with its candidates. The registry is read from the views in one
snapshot, with the signed checkpoint of the log at the position that snapshot holds: the
CLI's file and the API's body are the same bytes for the same ledger.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

import msgspec

from api.service.boards import Boards
from api.service.freshness import Views
from api.service.models.log import BundleSummary, RegistryCheckpoint, RegistryLine
from api.service.runs import Runs, run_summary
from ledger.errors import NotFoundError
from ledger.store.event_store import StoreSession
from projections import queries
from projections.rows import RunListRow

CHUNK = 64 * 1024  # bytes per piece of a streamed export


@dataclass(frozen=True)
class ExportScope:
    """What a bundle holds: these runs (their groups too), one comparison group, or (both
    None) the whole log."""

    runs: list[str] | None
    cohort: str | None

    @classmethod
    def of(cls, runs: Runs, boards: Boards, named: list[str], cohort: str | None) -> ExportScope:
        if named and cohort:
            raise NotFoundError("give runs or a comparison group, not both")
        return cls(
            [runs.resolve(r) for r in named] if named else None,
            boards.resolve(cohort) if cohort else None,
        )

    @property
    def whole(self) -> bool:
        return self.runs is None and self.cohort is None


def write_bundle(
    views: Views,
    out: IO[str],
    scope: ExportScope,
    *,
    group: bool = True,
    held: list[int] | None = None,
    progress: Callable[[int], None] | None = None,
) -> BundleSummary:
    """Write the bundle of ``scope`` to ``out``, with the claims the views make for it,
    read in one snapshot (never under a lock: concurrent exports hold up no reads) brought
    up to date as every read is."""
    # Imported here: the export loads the bundle writer and the verifier's claims, which no
    # other request of the service needs (a command's start-up: issue 33).
    from projections.export import export_runs  # noqa: PLC0415

    done = export_runs(
        views.ledger,
        out,
        scope.runs,
        cohort=scope.cohort,
        group=group,
        held=held or [],
        progress=progress,
        read_views=views.read_at,
    )
    return BundleSummary(
        events=done.events,
        tree_size=done.tree_size,
        runs=done.runs,
        keys=done.keys,
        cosigned_size=done.cosigned_size,
        cosignatures=done.cosignatures,
    )


@dataclass(frozen=True)
class Registry:
    """Every run of the views at one checkpoint: ``note`` is that checkpoint's signed note;
    ``chunks()`` the JSON Lines, one line per run in ingestion order."""

    checkpoint: RegistryCheckpoint
    note: str
    rows: list[RunListRow]

    @property
    def runs(self) -> int:
        return len(self.rows)

    def chunks(self) -> Iterator[bytes]:
        encoder = msgspec.json.Encoder()
        piece = bytearray()
        for row in self.rows:
            encoder.encode_into(
                RegistryLine(checkpoint=self.checkpoint, run=run_summary(row)), piece, -1
            )
            piece += b"\n"
            if len(piece) >= CHUNK:
                yield bytes(piece)
                piece.clear()
        if piece:
            yield bytes(piece)


def read_registry(views: Views) -> Registry:
    """The registry as the views hold it, read in one snapshot, and the signed checkpoint of
    the log at the position they had folded."""

    def read(session: StoreSession) -> list[RunListRow]:
        return queries.list_runs(session, queries.RunFilter(), limit=2**62)

    position, rows = views.read_at(read)
    ledger = views.ledger
    with ledger.store.transaction(commit=False) as session:
        size = ledger.tlog.size_at_position(session, position)
    signed = ledger.tlog.checkpoint(size)
    checkpoint = RegistryCheckpoint(
        size=signed.size, root_hash=base64.b64encode(signed.root).decode("ascii")
    )
    return Registry(checkpoint, signed.note, rows)
