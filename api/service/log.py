"""What offline verifiers need: the trust root, the log's checkpoint, proofs and entries,
bundles of runs with the claims the views make for them, and stored artifacts."""

from __future__ import annotations

import io

from api.service.errors import BadQueryError
from api.service.freshness import Views
from api.service.models import to_response
from api.service.models.log import (
    Checkpoint,
    ConsistencyProof,
    CosignedCheckpoint,
    InclusionProof,
    LogEntry,
    TrustRootDocument,
)
from api.service.runs import Runs
from ledger.errors import NotFoundError
from ledger.store.artifacts import ArtifactStore, StoredArtifact
from ledger.store.log_queries import (
    checkpoint_json,
    consistency_json,
    cosigned_checkpoint_json,
    entries_json,
    inclusion_json,
)
from ledger.witness.policy import Policy

__all__ = ["Log", "StoredArtifact"]


class Log:
    def __init__(self, views: Views, runs: Runs, witness_policy: Policy | None = None) -> None:
        self.views = views
        self.ledger = views.ledger
        self.runs = runs
        self.artifacts = ArtifactStore(views.ledger.store)
        # The ledger's witness policy (None: it has no witnesses): which cosigned checkpoint
        # the replies name, the newest that meets its quorum.
        self.witness_policy = witness_policy

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

    def inclusion(self, leaf: int, size: int | None = None) -> InclusionProof:
        return to_response(inclusion_json(self.ledger, leaf, size), InclusionProof)

    def consistency(self, old: int, new: int | None = None) -> ConsistencyProof:
        return to_response(consistency_json(self.ledger, old, new), ConsistencyProof)

    def entries(self, start: int, end: int | None = None) -> list[LogEntry]:
        return to_response(entries_json(self.ledger, start, end), list[LogEntry])

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
        resolved = [self.runs.resolve(r) for r in runs] if runs else None
        # Imported here: the export loads the bundle writer and the verifier's claims, which
        # no other request of the service needs (a command's start-up: issue 33).
        from projections.export import export_runs  # noqa: PLC0415

        buffer = io.StringIO()
        # The export reads the views in one snapshot (never under a lock: concurrent exports
        # hold up no reads), brought up to date as every read is.
        export_runs(
            self.ledger,
            buffer,
            resolved,
            cohort=cohort,
            group=group,
            held=held or [],
            read_views=self.views.read_at,
        )
        return buffer.getvalue()

    def artifact(self, digest: str) -> StoredArtifact:
        """A stored artifact, re-hashed: content that no longer matches its digest is refused."""
        return self.artifacts.get(digest)

    def has_artifact(self, digest: str) -> bool:
        return self.artifacts.has(digest)
