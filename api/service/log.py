"""What offline verifiers need: the trust root, the log's checkpoint, proofs and entries,
bundles of runs with the claims the views make for them (``api.service.export``), the whole
registry to mirror, and stored artifacts."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import IO

from api.service.boards import Boards
from api.service.built_files import BuiltFile
from api.service.errors import BadQueryError
from api.service.export import ExportScope, Registry, read_registry, write_bundle
from api.service.freshness import Views
from api.service.models import to_response
from api.service.models.log import (
    BundleSummary,
    Checkpoint,
    ConsistencyProof,
    CosignedCheckpoint,
    InclusionProof,
    LogEntry,
    TrustRootDocument,
    WitnessedCheckpoint,
)
from api.service.runs import Runs
from ledger.errors import NotFoundError
from ledger.store.artifacts import ArtifactStore, StoredArtifact
from ledger.store.log_queries import (
    checkpoint_json,
    consistency_json,
    cosigned_checkpoint_json,
    entries_json,
    held_checkpoint_size,
    inclusion_json,
)
from ledger.witness.policy import Policy

__all__ = ["ExportScope", "Log", "Registry", "StoredArtifact"]


class Log:
    def __init__(
        self, views: Views, runs: Runs, boards: Boards, witness_policy: Policy | None = None
    ) -> None:
        self.views = views
        self.ledger = views.ledger
        self.runs = runs
        self.boards = boards
        self.artifacts = ArtifactStore(views.ledger.store)
        # The ledger's witness policy (None: it has no witnesses): which cosigned checkpoint
        # the replies name, the newest that meets its quorum.
        self.witness_policy = witness_policy
        self._registry_bundle = BuiltFile("kernelindex-registry-")  # one per serving process

    def trust_root(self) -> TrustRootDocument:
        return to_response(self.ledger.trust_root.to_json(), TrustRootDocument)

    def checkpoint(self) -> Checkpoint:
        """The signed checkpoint of the current tree (signed by the commit that made it);
        with witnesses, the newest checkpoint they cosigned beside it, and how far it lags."""
        if self.witness_policy is None:
            # No witnesses: the reply is what it always was, byte for byte.
            return to_response(checkpoint_json(self.ledger), Checkpoint)
        # The cosigned one is read first: the signed one read after is at least as large
        # (the log only grows), so the lag is never negative and never of another read.
        witnessed = cosigned_checkpoint_json(self.ledger, self.witness_policy)
        reply = to_response(checkpoint_json(self.ledger), Checkpoint)
        cosigned = witnessed["cosigned"]
        if cosigned is not None:
            reply.cosigned = to_response(cosigned, CosignedCheckpoint)
            reply.witness_lag = reply.size - reply.cosigned.size
        else:
            reply.cosigned = None
            reply.witness_lag = None
        reply.newest_by_witness = witnessed["newestByWitness"]
        return reply

    def checkpoint_note(self) -> str:
        """The C2SP monitoring checkpoint (tlog-tiles' ``/checkpoint``): the newest note the
        witnesses cosigned, its cosignature lines appended, else the log-signed note."""
        reply = self.checkpoint()
        if isinstance(reply.cosigned, CosignedCheckpoint):
            return reply.cosigned.note
        return reply.note

    def witnessed(self, policy: Policy | None) -> WitnessedCheckpoint:
        """How the witnesses under ``policy`` stand (``kernelindex witness status``): the
        newest checkpoint, the newest cosigned one, the lag, each witness's newest size."""
        return to_response(cosigned_checkpoint_json(self.ledger, policy), WitnessedCheckpoint)

    def inclusion(self, leaf: int, size: int | None = None) -> InclusionProof:
        return to_response(inclusion_json(self.ledger, leaf, size), InclusionProof)

    def consistency(self, old: int, new: int | None = None) -> ConsistencyProof:
        return to_response(consistency_json(self.ledger, old, new), ConsistencyProof)

    def entries(self, start: int, end: int | None = None) -> list[LogEntry]:
        return to_response(entries_json(self.ledger, start, end), list[LogEntry])

    def scope(self, runs: list[str] | None = None, cohort: str | None = None) -> ExportScope:
        """What a bundle of these runs or this group holds (neither: the whole log), named
        as ``show`` and ``leaderboard`` name them: the one rule of every face's export."""
        return ExportScope.of(self.runs, self.boards, list(runs or []), cohort)

    def held_size(self, note: str) -> int:
        """The size of a checkpoint someone holds, once it is shown to be this log's."""
        return held_checkpoint_size(self.ledger, note)

    def export(
        self,
        out: IO[str],
        scope: ExportScope,
        *,
        group: bool = True,
        held: list[int] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> BundleSummary:
        """Write the bundle of ``scope`` (``scope()``) to ``out`` for ``kernelindex verify``:
        a run's carries every run of its group and the claims the views make for them; the
        whole log's carries every event and no claims. ``held``: tree sizes of checkpoints
        the reader holds; the bundle proves it extends each."""
        if scope.cohort and not group:
            raise BadQueryError("a cohort's bundle is its group: group=false goes with run=")
        return write_bundle(self.views, out, scope, group=group, held=held, progress=progress)

    def bundle(
        self,
        runs: list[str],
        cohort: str | None,
        *,
        group: bool = True,
        held: list[int] | None = None,
    ) -> str:
        """A bundle (JSON Lines) of the runs named, or of a comparison group, with the claims
        the views make for them, for ``kernelindex verify``."""
        if bool(runs) == bool(cohort):
            raise NotFoundError("give run=DIGEST (repeatable) or cohort=KEY, not both")
        if cohort and not group:
            raise BadQueryError("a cohort's bundle is its group: group=false goes with run=")
        buffer = io.StringIO()
        self.export(buffer, self.scope(runs, cohort), group=group, held=held)
        return buffer.getvalue()

    def registry_bundle(self) -> Iterator[bytes]:
        """The whole log as one bundle (what ``kernelindex export --all`` writes), built once
        per tree size and kept (``api.service.built_files``): while a newer one is built,
        the last whole one, a snapshot proven against its own checkpoint."""
        scope = self.scope()
        size = self.views.read(self.ledger.tlog.tree_size)
        return self._registry_bundle.pieces(size, lambda out: self.export(out, scope))

    def close(self) -> None:
        self._registry_bundle.close()

    def registry(self) -> Registry:
        """Every run of the registry, one JSON line each, at one signed checkpoint."""
        return read_registry(self.views)

    def artifact(self, digest: str) -> StoredArtifact:
        """A stored artifact, re-hashed: content that no longer matches its digest is refused."""
        return self.artifacts.get(digest)

    def has_artifact(self, digest: str) -> bool:
        return self.artifacts.has(digest)
