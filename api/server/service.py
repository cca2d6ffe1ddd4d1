"""The ledger as the HTTP API sees it: every read and write the controllers delegate to.

Controllers stay thin; this service owns the rules of the edge: which statement a write
endpoint accepts, one writer per process, projections fresh before a read.

Reads only the API serves answer its typed replies (``api.server.responses``). The read
models the HTML pages render too (a run's record and history, groups, operations,
leaderboards, search, comparisons, the checkpoint) stay JSON-ready dicts, which the pages
index and the API controllers convert to their typed replies.
"""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Callable
from typing import Any

import structlog

from api.server.read_models import (
    Cursor,
    board_entry,
    history_entry,
    page_fields,
    run_item,
)
from api.server.responses import to_response
from api.server.responses.history import KeyHistory
from api.server.responses.jobs import Job
from api.server.responses.keys import KeyList, KeyRecord
from api.server.responses.log import (
    ConsistencyProof,
    Health,
    InclusionProof,
    LogEntry,
    TrustRootDocument,
)
from api.server.responses.runs import RunList
from api.server.responses.views import RunComparison
from domain.documents import parse_json
from domain.errors import DomainError
from domain.evidence import EvidenceLevel
from domain.ranking import View
from domain.statements import PredicateType
from ledger.application import Ledger
from ledger.errors import (
    NotFoundError,
    StoreError,
    SubjectMismatchError,
    store_error,
)
from ledger.group_commit import GroupCommitWriter, Writer
from ledger.history import (
    DEFAULT_PAGE,
    history_page,
    state_events_before,
)
from ledger.ids import principal_id, run_id
from ledger.jobs import job as find_job
from ledger.jobs import open_jobs
from ledger.receipt import Receipt
from ledger.signing.dsse import MAX_ENVELOPE_BYTES, Envelope, parse_envelope
from ledger.store.artifacts import ArtifactStore, StoredArtifact
from ledger.store.log_queries import checkpoint_json, consistency_json, entries_json, inclusion_json
from projections import queries
from projections.export import export_runs
from projections.group_labels import GroupLabel, group_labels
from projections.references import resolve_group_in, resolve_run_in
from projections.rows import OperationGroupRow
from projections.run_changes import changes_by_event
from projections.run_page import run_page
from projections.run_record import MAX_COMPARED, compare_many, compare_runs
from projections.runner import ProjectionRunner
from projections.search import MAX_GROUPS, search_groups, search_result
from projections.subscription import ViewsFollower

MAX_PAGE = 200
# Bodies up to this size are parsed on the event loop (an attestation is ~2 KiB, an
# ingestion of a typical run ~5 KiB); larger ones, up to the 2 MiB cap, on a thread.
INLINE_PARSE_BYTES = 64 * 1024
_log = structlog.get_logger("kernelindex.api")

BOARD_PAGE = 100  # entries per leaderboard page (API); the pages show 50
BOARD_MAX = 500


class BadQueryError(DomainError):
    """A query parameter names no value we know."""

    code = "malformed-request"


class WrongEndpointError(SubjectMismatchError):
    """A signed statement posted to an endpoint for another kind of statement or subject."""

    code = "wrong-endpoint"


class LedgerService:
    def __init__(self, ledger: Ledger, writer: Writer | None = None) -> None:
        self.ledger = ledger
        self.runner = ProjectionRunner(ledger)
        # One writer commits concurrent requests in groups: the ledger's writer process
        # (``kernelindex serve``: ``writer``), else a writer thread of this process; across
        # processes (PostgreSQL) the ledger's own retry and log lock keep writers consistent.
        self.writer: Writer = writer if writer is not None else GroupCommitWriter(ledger)
        self._projection_lock = threading.Lock()
        self.artifacts = ArtifactStore(ledger.store)
        self.follower: ViewsFollower | None = None

    # ---------------------------------------------------------------- writes

    def append(
        self, body: bytes, accepts: set[PredicateType], subject: str | None = None
    ) -> Receipt:
        """Admit a signed envelope posted to an endpoint for ``accepts`` about ``subject``."""
        return self.writer.append(self._checked(body, accepts, subject))

    async def append_async(
        self,
        body: bytes,
        accepts: set[PredicateType],
        subject: str | None = None,
        *,
        before_queue: Callable[[str], None] | None = None,
    ) -> Receipt:
        """The same, awaiting the group commit instead of blocking a worker thread (the
        parse of a large body runs off the event loop; a small one, a fraction of a
        millisecond, on it: the thread hop cost more than the parse). The body is parsed
        once: the ledger admits the parsed envelope as it is. ``before_queue`` sees the key id
        the envelope names (not yet verified) before it is queued: the rate limit's check."""
        if len(body) <= INLINE_PARSE_BYTES:
            envelope = self._checked(body, accepts, subject)
        else:
            envelope = await asyncio.to_thread(self._checked, body, accepts, subject)
        if before_queue is not None:
            before_queue(envelope.keyid)
        return await asyncio.wrap_future(self.writer.submit(envelope))

    @staticmethod
    def signer_of_receipt(receipt: Receipt) -> str | None:
        """Who really signed an accepted write (a fresh one: replays cost nothing)."""
        if receipt.duplicate or not receipt.signer:
            return None
        return receipt.signer

    @staticmethod
    def _checked(body: bytes, accepts: set[PredicateType], subject: str | None) -> Envelope:
        """The envelope, if it is well formed and belongs to this endpoint."""
        envelope = parse_envelope(parse_json(body, max_bytes=MAX_ENVELOPE_BYTES))
        statement = envelope.statement()
        if statement.predicateType not in accepts:
            wanted = " or ".join(sorted(str(p) for p in accepts))
            raise WrongEndpointError(
                f"this endpoint takes {wanted} statements, not {statement.predicateType}"
            )
        if subject is not None and statement.subject_digest != subject:
            raise WrongEndpointError(
                f"the statement is about {statement.subject_digest}, not {subject}"
            )
        return envelope

    # ----------------------------------------------------------------- reads

    def fresh(self) -> int | None:
        """Fold new events into the read models before answering from them; the views'
        position reached (what the read cache keys answers by), None if not folded.

        A store that refuses writes (full, read-only) cannot take the fold; the read is then
        answered from the views as they stand rather than refused (if the store cannot be
        read either, the read itself fails with the store's error)."""
        with self._projection_lock:
            try:
                return self.runner.catch_up().position
            except Exception as exc:
                refused = exc if isinstance(exc, StoreError) else store_error(exc)
                if refused is None:
                    raise
                _log.warning("views_not_refreshed", code=refused.code, detail=refused.message)
                return None

    def resolve(self, reference: str) -> str:
        """A run by digest, prefix, name or external id (``projections.references``)."""
        return resolve_run_in(self.ledger, reference, self.runner, self.fresh)

    def resolve_group(self, reference: str) -> str:
        return resolve_group_in(self.ledger, reference, self.runner, self.fresh)

    def list_runs(
        self,
        *,
        comparison_key: str | None = None,
        source: str | None = None,
        level: EvidenceLevel | None = None,
        gpu: str | None = None,
        benchmark: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> RunList:
        self.fresh()
        where = queries.RunFilter(
            comparison_key=comparison_key,
            source=source,
            level=level,
            gpu=gpu,
            benchmark=benchmark,
            after=Cursor.decode(cursor).after if cursor is not None else None,
        )
        size = max(1, min(limit, MAX_PAGE))
        with self.ledger.store.transaction(commit=False) as session:
            rows = queries.list_runs(session, where, size + 1)
        more = len(rows) > size
        rows = rows[:size]
        items = [run_item(r) for r in rows]
        next_cursor = Cursor(rows[-1].ingested_position).encode() if more and rows else None
        return to_response({"items": items, "next": next_cursor}, RunList)

    def run_record(self, reference: str) -> dict[str, Any]:
        digest = self.resolve(reference)
        self.fresh()
        return run_page(self.ledger, digest)

    def run_history(
        self, reference: str, start: int = 1, limit: int = DEFAULT_PAGE
    ) -> dict[str, Any]:
        """One page of a run's history (versions ``start`` ..), re-verified, with what each
        event changed. What an event changed depends only on the run's state events before
        it (attestations change nothing), so a page costs the page, however long the run."""
        digest = self.resolve(reference)
        page = history_page(self.ledger, run_id(digest), start, limit)
        earlier = state_events_before(self.ledger, digest, page.start)
        leaves = self._leaves([e.position for e in page.entries])
        changes = changes_by_event(digest, [*earlier, *page.entries])
        return {
            "run": digest,
            "events": [
                history_entry(e, leaves.get(e.position), changes.get(e.position, {}))
                for e in page.entries
            ],
            "allVerified": all(e.ok for e in page.entries),  # of this page
            **page_fields(page),
        }

    def _leaves(self, positions: list[int]) -> dict[int, int]:
        if not positions:
            return {}
        with self.ledger.store.transaction(commit=False) as session:
            return self.ledger.tlog.leaves_for_positions(session, positions)

    def groups(self, benchmark: str | None, gpu: str | None) -> list[dict[str, Any]]:
        self.fresh()
        with self.ledger.store.transaction(commit=False) as session:
            rows = queries.groups(session, benchmark, gpu)
        return [
            {
                "comparisonKey": r.comparison_key,
                "benchmark": r.benchmark,
                "gpu": r.product,
                "metric": r.metric,
                "statistic": r.statistic,
                "unit": r.unit,
                "runs": r.runs,
            }
            for r in rows
        ]

    def operations(self, limit: int | None = None) -> list[dict[str, Any]]:
        self.fresh()
        _, rows = self.runner.snapshot(lambda session: queries.operations(session, limit))
        return [
            {
                "operation": r.benchmark,
                "runs": r.runs,
                "groups": r.groups,
                "gpus": r.gpus,
            }
            for r in rows
        ]

    def operation(self, name: str) -> dict[str, Any]:
        """One operation's groups, by GPU, each with its #1 and what sets it apart from the
        groups that look like it."""
        self.fresh()

        def read(session: Any) -> tuple[list[OperationGroupRow], list[GroupLabel]]:
            rows = queries.operation_groups(session, name)
            return rows, group_labels(session, [r.comparison_key for r in rows])

        _, (rows, labels) = self.runner.snapshot(read)
        if not rows:
            raise NotFoundError(f"no comparison group of an operation named {name!r}")
        by_key = {label.key: label for label in labels}
        groups: list[dict[str, Any]] = []  # JSON-ready, the API types it
        for r in rows:
            label = by_key[r.comparison_key]
            alike = label.lookalikes(labels)
            groups.append(
                {
                    "comparisonKey": r.comparison_key,
                    "gpu": r.product,
                    "metric": r.metric,
                    "statistic": r.statistic,
                    "unit": r.unit,
                    "runs": r.runs,
                    "parts": label.parts,
                    "apartBy": label.separated_by(alike) if alike else None,
                    "apartShort": label.short_apart(alike) if alike else None,
                    "top": {"run": r.top_run, "name": r.top_name, "value": r.top_value},
                }
            )
        return {
            "operation": name,
            "gpus": sorted({str(g["gpu"]) for g in groups if g["gpu"]}),
            "stacks": sorted({g["parts"]["protocol"] for g in groups}),
            "groups": groups,
        }

    def leaderboard(
        self,
        key: str,
        view: View,
        min_level: EvidenceLevel | None = None,
        start: int = 1,
        limit: int = BOARD_PAGE,
    ) -> dict[str, Any]:
        """A page of a group's ranking: ``limit`` entries from the ``start``-th (1-based)."""
        size = max(1, min(limit, BOARD_MAX))
        self.fresh()
        with self.ledger.store.transaction(commit=False) as session:
            rows = queries.leaderboard(session, key, view, min_level, offset=start - 1, limit=size)
            best = queries.leaderboard(session, key, view, min_level, limit=1)
            total = queries.ranked_count(session, key, view, min_level)
            known = queries.group_exists(session, key)
        if not known:
            raise NotFoundError(f"no comparison group {key}")
        first = best[0].value if best else None
        return {
            "comparisonKey": key,
            "view": str(view),
            "minLevel": min_level.name.lower() if min_level is not None else None,
            "total": total,
            "start": start,
            "next": start + size if start - 1 + size < total else None,
            "entries": [board_entry(r, first) for r in rows],
        }

    def search(self, query: str, limit: int = MAX_GROUPS) -> dict[str, Any]:
        """Comparison groups every word of ``query`` matches (``projections.search``)."""
        self.fresh()
        _, found = self.runner.snapshot(lambda session: search_groups(session, query, limit))
        return search_result(query, found)

    def compare_many(self, references: list[str]) -> dict[str, Any]:
        if not 2 <= len(references) <= MAX_COMPARED:  # before resolving any of them
            raise DomainError(f"compare 2 to {MAX_COMPARED} different runs")
        return compare_many(self.ledger, [self.resolve(r) for r in references])

    def compare(self, a: str, b: str) -> RunComparison:
        compared = compare_runs(self.ledger, self.resolve(a), self.resolve(b))
        return to_response(compared, RunComparison)

    def keys(self, cursor: str | None = None, limit: int = 50) -> KeyList:
        """A page of registered keys in registration order (anyone may add attester keys:
        a page costs its keys, read in one query)."""
        size = max(1, min(limit, MAX_PAGE))
        after = Cursor.decode(cursor).after if cursor is not None else 0
        page = self.ledger.registered_keys(after, size + 1)
        more = len(page) > size
        page = page[:size]
        states = self.ledger.key_states(k for _, k in page)
        items = [KeyRecord.of(states[k]) for _, k in page if k in states]
        return KeyList(items=items, next=Cursor(page[-1][0]).encode() if more and page else None)

    def key(self, key_id: str) -> KeyRecord:
        record = self.ledger.key_state(key_id)
        if record is None:
            raise NotFoundError(f"no key {key_id} is registered")
        return KeyRecord.of(record)

    def key_history(self, key_id: str) -> KeyHistory:
        self.key(key_id)
        page = history_page(self.ledger, principal_id(key_id))  # a key has at most 2 events
        leaves = self._leaves([e.position for e in page.entries])
        history = {
            "keyId": key_id,
            "events": [history_entry(e, leaves.get(e.position)) for e in page.entries],
            "allVerified": all(e.ok for e in page.entries),
            **page_fields(page),
        }
        return to_response(history, KeyHistory)

    def open_jobs(
        self, product: str | None, architecture: str | None, agent: str | None
    ) -> list[Job]:
        found = open_jobs(self.ledger, product=product, architecture=architecture, agent=agent)
        return to_response([j.to_json() for j in found], list[Job])

    @staticmethod
    def job_claimed_in(body: bytes) -> str | None:
        """The job id a posted claim names (its full admission happens in the ledger)."""
        envelope = parse_envelope(parse_json(body, max_bytes=MAX_ENVELOPE_BYTES))
        predicate = envelope.statement().predicate
        job_id = predicate.get("jobId") if isinstance(predicate, dict) else None
        return job_id if isinstance(job_id, str) else None

    def job(self, job_id: str) -> Job:
        return to_response(find_job(self.ledger, job_id).to_json(), Job)

    def trust_root(self) -> TrustRootDocument:
        return to_response(self.ledger.trust_root.to_json(), TrustRootDocument)

    def checkpoint(self) -> dict[str, Any]:
        return checkpoint_json(self.ledger)

    def inclusion(self, leaf: int, size: int | None) -> InclusionProof:
        return to_response(inclusion_json(self.ledger, leaf, size), InclusionProof)

    def consistency(self, old: int, new: int | None) -> ConsistencyProof:
        return to_response(consistency_json(self.ledger, old, new), ConsistencyProof)

    def entries(self, start: int, end: int | None) -> list[LogEntry]:
        return to_response(entries_json(self.ledger, start, end), list[LogEntry])

    def bundle(
        self,
        runs: list[str],
        cohort: str | None,
        *,
        group: bool = True,
        held: list[int] | None = None,
    ) -> str:
        if bool(runs) == bool(cohort):
            raise NotFoundError("give run=DIGEST (repeatable) or cohort=KEY, not both")
        if cohort and not group:
            raise BadQueryError("a cohort's bundle is its group: group=false goes with run=")
        resolved = [self.resolve(r) for r in runs] if runs else None
        # The fold takes the projection lock briefly; the export itself only reads (a
        # consistent snapshot of the views), so concurrent exports never hold up reads.
        self.fresh()
        buffer = io.StringIO()
        export_runs(
            self.ledger,
            buffer,
            resolved,
            cohort=cohort,
            fold=False,
            group=group,
            held=held or [],
        )
        return buffer.getvalue()

    def artifact(self, digest: str) -> StoredArtifact:
        return self.artifacts.get(digest)

    def start(self) -> None:
        """On PostgreSQL, follow the ledger: the views fold each commit as it lands
        (``projections.subscription``); reads still catch up for what they wrote."""
        if self.ledger.store.postgres and self.follower is None:
            self.follower = ViewsFollower(ProjectionRunner(self.ledger)).start()

    def close(self) -> None:
        self.writer.close()
        if self.follower is not None:
            self.follower.stop()
            if self.follower.error is not None:
                _log.warning("views_follower_failed", detail=str(self.follower.error))

    def health(self) -> Health:
        with self.ledger.store.transaction(commit=False) as session:
            size = self.ledger.tlog.tree_size(session)
        return Health(
            status="ok",
            origin=self.ledger.trust_root.origin,
            tree_size=size,
            database=self.ledger.store.engine.dialect.name,
        )
