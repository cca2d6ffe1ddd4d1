"""The ledger: the only way in. Every write is a signed DSSE envelope, checked, then appended.

Admission order (each step fails closed with a named reason; nothing is stored on failure):
1. envelope shape, base64 and statement schema;
2. an identical envelope already stored → its original receipt, nothing new (idempotent);
3. predicate schema;
4. who may sign it (``ledger.authority``, the rule re-verification uses too): a registered
   key, unrevoked and valid at issuedAt, in a role allowed to sign the predicate;
5. what the statement claims about its subject (digests, references, the run exists...);
6. append, retrying on optimistic-concurrency conflicts so no acknowledged write is lost.
   Inside the transaction that stores and sequences the group, under the log's lock, the
   signers' keys are read again: if another process revoked one meanwhile, the group is
   admitted again from the new state. So every event's signer is judged as the log stands at
   the event's own place in it, which is what every re-verification judges too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.application import Application, ProcessingEvent
from eventsourcing.persistence import IntegrityError, OperationalError, Recording
from sqlalchemy.engine import make_url

from domain.errors import DomainError
from domain.timestamps import utc_now
from ledger.admission import Admission, Admitted, AdmittedGroup
from ledger.admission_types import receipt_of
from ledger.aggregates import Principal, Run, RunState, principal_id, run_id, topic_of
from ledger.authority import KeyState
from ledger.errors import (
    ConflictError,
    LogIntegrityError,
    StoreError,
    is_transient,
    lost_connection,
    write_refusal,
)
from ledger.history_reads import require_run
from ledger.key_fold import fold_key_events
from ledger.logged_event import LoggedEvent
from ledger.run_manifests import stored_run_manifests
from ledger.signing.keys import SigningKey
from ledger.signing.log_key import DeferredKey, require_log_key
from ledger.signing.trust import TrustRoot
from ledger.store.connections import ping_on_checkout
from ledger.store.event_store import EventStore, connection_of
from ledger.store.fold_fields import handed_payloads, write_fold_fields
from ledger.store.group_index import record_members
from ledger.store.log_leaves import parsed_at
from ledger.store.log_watch import LogWatch
from ledger.store.read_door import SessionRows
from ledger.store.schema import APPLICATION_NAME, SchemaError, require_current
from ledger.store.stored_events import (
    StoredRecord,
    records_of,
    stored_records,
    stored_states,
    stored_versions,
)
from ledger.store.transparency_log import InclusionProof, Sequenced, TransparencyLog
from ledger.timing import GROUP_SIZE, Stage, note, timed, timed_block

if TYPE_CHECKING:
    from ledger.witness.client import WitnessEndpoint
    from ledger.witnessing import Witnessing

MAX_APPEND_ATTEMPTS = 20
# Races lost (another writer committed to the same runs or keys between this group's reads
# and its commit) before the group is admitted holding the event table's lock: then it
# cannot lose again, so a writer that keeps losing to a busier one still gets through.
LOCKED_AFTER = 3

Committed = tuple[list[Recording[UUID]], tuple[int, dict[int, InclusionProof]] | None]

_log = logging.getLogger(__name__)


class _SignerChanged(Exception):
    """A key that authorised part of the group changed (was revoked) in another process
    before the group committed: admit the group again from the new state."""


_READ_FACTORY = "ledger.store.read_only:ReadFactory"


# Named, not imported: eventsourcing imports it only for a ledger that writes, so a read-only
# command never loads eventsourcing-sqlalchemy and the ORM (its start-up budget).
WRITING_PERSISTENCE = "ledger.store.batched_writes:BatchedWritesFactory"
# A writer's transcoder: the standard one's bytes, by msgspec (ledger.store.lean_transcoder).
WRITING_TRANSCODER = "ledger.store.lean_transcoder:LeanJSONTranscoder"


class Ledger(Application[UUID]):
    """KernelIndex event store (eventsourcing Application on SQLAlchemy)."""

    name = APPLICATION_NAME

    def __init__(
        self,
        db_url: str,
        trust_root: TrustRoot,
        *,
        clock: Callable[[], datetime] = utc_now,
        cache_size: int = 10_000,
        log_key: SigningKey | DeferredKey | None = None,
        read_only: bool = False,
    ) -> None:
        # read_only: for commands that never append (ledger/store/read_only.py says why it exists).
        self.read_only = read_only
        # Asks the witnesses to cosign each new checkpoint, after its commit (a writer's).
        # Set first: ``close`` reads it, and a refused open closes what it opened.
        self.witnessing: Witnessing | None = None
        super().__init__(
            env={
                "PERSISTENCE_MODULE": (
                    "ledger.store.read_only:ReadFactory" if read_only else WRITING_PERSISTENCE
                ),
                "SQLALCHEMY_URL": db_url,
                **({} if read_only else {"TRANSCODER_TOPIC": WRITING_TRANSCODER}),
                # Tables are made by `kernelindex db upgrade` (ledger/store/schema.py), never here.
                "CREATE_TABLE": "n",
                # The cache fast-forwards from the database on every get, so other writers'
                # events (revocations included) are always seen.
                "AGGREGATE_CACHE_MAXSIZE": str(cache_size),
                "AGGREGATE_CACHE_FASTFORWARD": "y",
            }
        )
        # eventsourcing-sqlalchemy makes the engine without pre-ping; API workers, projector
        # and sequencer all need a connection PostgreSQL dropped while idle to be replaced.
        self.store = EventStore(self.recorder)
        ping_on_checkout(self.store.engine)
        try:
            require_current(
                self.store.engine,
                make_url(db_url).render_as_string(hide_password=True),
            )
        except SchemaError:
            self.close()  # no pooled connection outlives a refused open
            raise
        self.trust_root = trust_root
        self.clock = clock
        if isinstance(log_key, SigningKey):  # a deferred one is checked when it is read
            require_log_key(log_key, trust_root.log_key)
        self.tlog = TransparencyLog(self.store, trust_root.origin, trust_root.log_key, log_key)
        self.admission = Admission(
            self.store, self.mapper, trust_root, clock, cache_size, before_group=self._watch_log
        )
        self._writer = threading.Lock()  # one group admitted at a time per ledger object
        # The newest head of the log this object has seen (read or committed): its caches
        # were filled from a database that held it.
        self._watch = LogWatch(self.tlog)

    def start_witnessing(self, witnesses: Sequence[WitnessEndpoint], **options: Any) -> Witnessing:
        """Ask these witnesses to cosign each checkpoint this ledger's commits sign, in the
        background (``ledger.witnessing``); ``options`` go to :class:`Witnessing`."""
        if self.read_only or not self.tlog.can_sign:
            raise StoreError("witnessing needs a ledger opened to write, with the log key")
        # Imported here: the HTTP client it needs is no part of a ledger that only reads.
        from ledger.witnessing import Witnessing  # noqa: PLC0415

        if self.witnessing is None:
            self.witnessing = Witnessing(self.tlog, witnesses, **options).start()
        return self.witnessing

    def close(self) -> None:
        if self.witnessing is not None:
            self.witnessing.close()
            self.witnessing = None
        super().close()

    # ---------------------------------------------------------------- writes

    def append(self, envelope_json: object) -> LoggedEvent:
        """Admit one signed envelope; return its receipt or raise a DomainError saying why."""
        result = self.append_many([envelope_json])[0]
        if isinstance(result, DomainError):
            raise result
        return result

    @timed(Stage.GROUP)
    def append_many(self, envelopes: Sequence[object]) -> list[LoggedEvent | DomainError]:
        """Admit envelopes in order and commit the accepted ones in one transaction.

        Each envelope gets its receipt or the reason it was refused; a refusal does not affect
        the others, and later envelopes see the effect of earlier ones (a key registered, then
        used). Events are stored and logged in arrival order. One commit (one fsync, one log
        sequencing pass) for the whole group is what makes concurrent writers fast.
        """
        if self.read_only:
            raise StoreError("this ledger was opened to read: open it to write to append")
        note(GROUP_SIZE, len(envelopes))
        with self._writer:
            outcome_unknown = False
            for attempt in range(MAX_APPEND_ATTEMPTS):
                try:
                    results, committed = self._append_group(
                        envelopes, locked=attempt >= LOCKED_AFTER
                    )
                    break
                except _SignerChanged:
                    # Not a lost race to retry blindly: the keys are read afresh, so the
                    # revoked key's envelopes are refused this time (each key changes at
                    # most twice, so this settles).
                    if attempt == MAX_APPEND_ATTEMPTS - 1:
                        raise ConflictError(
                            "the signing keys kept changing while this write was admitted; "
                            "nothing was stored, send it again"
                        ) from None
                    continue
                except (IntegrityError, OperationalError) as exc:
                    # Retried only if another writer won the race (or held the SQLite lock),
                    # or the connection dropped (the retry takes a fresh one, and finds the
                    # group's envelopes stored if the lost COMMIT went through); a full,
                    # read-only or failing store refuses at once, saying so.
                    outcome_unknown = outcome_unknown or lost_connection(exc)
                    if not is_transient(exc) or attempt == MAX_APPEND_ATTEMPTS - 1:
                        raise write_refusal(exc, attempt + 1, outcome_unknown) from exc
                    # Full jitter: two processes that keep colliding on one run stop
                    # retrying in lockstep (a fixed backoff let one starve the other).
                    time.sleep(random.uniform(0, min(0.001 * 2**attempt, 0.2)))  # noqa: S311
        # Outside the retry: once committed, a group is never admitted again (its envelopes
        # would come back as duplicates of themselves).
        replayed = self._replayed_inclusions([r for r in results if isinstance(r, LoggedEvent)])
        return [self._settled_receipt(r, committed, replayed) for r in results]

    def _replayed_inclusions(self, receipts: list[LoggedEvent]) -> dict[int, InclusionProof]:
        """The inclusion proofs of a group's duplicates (envelopes stored before), with one
        root and one node query for all of them: a replay of many envelopes costs the writer
        one read, not one per envelope. Empty when there is one or none, or when any is not
        sequenced yet or the read fails: then each takes its own path (which catches the log
        up, or says why it cannot)."""
        positions = sorted({r.position for r in receipts})
        if len(positions) < 2:
            return {}
        try:
            with self.store.transaction(commit=False) as session:
                return self.tlog.inclusions(session, positions, self.tlog.tree_size(session))
        except (LogIntegrityError, IntegrityError, OperationalError):
            return {}

    def _settled_receipt(
        self,
        result: LoggedEvent | DomainError | Admitted,
        committed: Committed,
        replayed: dict[int, InclusionProof],
    ) -> LoggedEvent | DomainError:
        """The group is committed: a failure now (reading a duplicate's proof) concerns that
        envelope alone, and never means that nothing was stored."""
        if isinstance(result, LoggedEvent) and result.position in replayed:
            return dataclasses.replace(result, inclusion=replayed[result.position])
        try:
            return self._receipt(result, committed)
        except (IntegrityError, OperationalError) as exc:
            return StoreError(
                "the envelope is stored, but reading its inclusion proof failed "
                f"({type(exc).__name__}); send it again for its receipt"
            )

    def _append_group(
        self, envelopes: Sequence[object], *, locked: bool = False
    ) -> tuple[list[LoggedEvent | DomainError | Admitted], Committed]:
        """Admit a group, then store and sequence it. ``locked``: in one transaction that
        holds the event table's lock from before the first read (after lost races)."""
        group: AdmittedGroup | None = None
        try:
            with self._locked_transaction() if locked else contextlib.nullcontext():
                group = self.admission.admit(envelopes)
                if not group.events:
                    return group.results, ([], None)
                committed, sequenced = self._commit(group)
        except BaseException:
            if group is not None:
                self.admission.abandoned(group)  # admitted against state never stored
            raise
        self.tlog.committed(sequenced)  # only now: the transaction that made it committed
        self._watch.committed(sequenced.head)
        self.admission.stored(group)
        self.store.committed(len(group.events))  # the WAL's checkpoints, off this thread
        if self.witnessing is not None:
            self.witnessing.poke()  # cosigned after the commit, never inside it
        return group.results, committed

    def _watch_log(self) -> None:
        """First in each group's reads: the log still holds the newest head this object saw,
        else the database went back (a backup restored, a failover to a standby without the
        last commits) and every cache filled from it is stale. Versions and tree sizes come
        back under other content, so nothing keyed on them may be reused: the runs and the
        keys are dropped and read afresh (the tree state is reused only at the stored head it
        ended at, so it needs no dropping). One primary-key lookup a group.
        Not seen: on PostgreSQL (each statement reads the latest commits) a commit that lands
        between this read and the group's cache fills and is then lost."""
        with self.store.transaction(commit=False) as session:
            seen = self._watch.seen
            if not self._watch.still_holds(session):
                _log.warning(
                    "the log went back from %d to %d leaves, or another leaf stands where it "
                    "ended: cached runs and keys dropped",
                    seen[0],
                    self._watch.seen[0],
                )
                self.admission.forget_everything()

    @contextlib.contextmanager
    def _locked_transaction(self) -> Iterator[None]:
        with self.store.transaction(commit=True) as session:
            self.store.hold_write_lock(session)
            yield

    @timed(Stage.COMMIT)
    def _commit(self, group: AdmittedGroup) -> tuple[Committed, Sequenced]:
        """Store the new events and sequence them into the log in one transaction.

        Storing takes the event table's lock (PostgreSQL: LOCK TABLE, held to the commit;
        SQLite: the write lock), so no other writer can commit until this one has: the keys
        that authorised the group are read again here, and the group is refused back to its
        admission (``_SignerChanged``) if any of them changed since it was read.
        """
        events, signers, groups = group.events, group.signers, group.groups
        payloads = handed_payloads(group.parsed)  # as admission parsed them: not decoded again
        with self.store.transaction(commit=True) as session:
            with timed_block(Stage.SAVE):
                # The one place a group's per-event rows are written (events here, their
                # leaves in ``sequence`` below): a side table of per-event fields belongs here,
                # in this transaction, from ``recordings`` (position, ids, state bytes).
                recordings = self._save_events(events)
            if signers:
                now = stored_versions(self.store, set(signers))
                changed = [pid for pid, version in signers.items() if now.get(pid) != version]
                if changed:
                    self.admission.signers_changed(changed)
                    raise _SignerChanged(f"{len(changed)} signer key(s) changed")
            # A run joins its group at the one event that gave it a workload: its admitted
            # ingestion, or the attachment that completed it (matched by version).
            joined = [
                (event.run_digest, groups[event.run_digest][0], r.notification.id)
                for r in recordings
                if isinstance(event := r.domain_event, Run.Ingested | Run.ManifestsAttached)
                and event.run_digest in groups
                and groups[event.run_digest][1] == r.notification.originator_version
            ]
            record_members(session, joined)
            # ``payloads``: the group's envelopes as parsed, not decoded again for these rows.
            write_fold_fields(
                session, [(r.notification.id, r.domain_event) for r in recordings], payloads
            )
            sequenced = self.tlog.sequence(
                session,
                [
                    (n.id, n.originator_id, n.originator_version, n.topic, n.state)
                    for n in (r.notification for r in recordings)
                ],
                parsed_at(recordings, group.parsed),  # nor canonicalised again
            )
            proofs = self.tlog.inclusions(
                session, [r.notification.id for r in recordings], sequenced.compact.size, sequenced
            )
        return (recordings, (sequenced.compact.size, proofs)), sequenced

    def _save_events(self, events: list[Any]) -> list[Recording[UUID]]:
        """``Application.save`` for a group of events: ``save`` tells events from aggregates
        with a runtime ``Protocol`` isinstance check per object (~20 µs each, a tenth of an
        ingestion's store time); admission hands over events only. The ledger takes no
        snapshots, so recording and notifying are all of ``save`` that applies."""
        processing: ProcessingEvent[UUID] = ProcessingEvent()
        processing.events.extend(events)
        recordings = self._record(processing)
        self._notify(recordings)
        return recordings

    def _receipt(
        self, result: LoggedEvent | DomainError | Admitted, committed: Committed
    ) -> LoggedEvent | DomainError:
        if isinstance(result, DomainError):
            return result
        if isinstance(result, LoggedEvent):
            return self._with_inclusion(result)
        recordings, logged = committed
        assert logged is not None
        recording = recordings[result.first_event]
        event = recording.domain_event
        position = recording.notification.id  # the event's place in the notification log
        originator = recording.notification.originator_id
        return receipt_of(
            position=position,
            # The event's own UUID as it is (a UUID made again from its text costs ~3 µs).
            aggregate_id=originator if type(originator) is UUID else UUID(str(originator)),
            version=recording.notification.originator_version,
            event=recording.notification.topic.rsplit(":", 1)[-1],
            subject_digest=result.statement.subject_digest,
            envelope_digest=str(getattr(event, "envelope_digest", "")),
            received_at=str(getattr(event, "received_at", "")),
            duplicate=result.duplicate,
            inclusion=logged[1][position],
            signer=str(getattr(event, "signer", "")),
        )

    def _with_inclusion(self, receipt: LoggedEvent) -> LoggedEvent:
        """A duplicate's receipt, with the inclusion proof of the original event."""
        with self.store.transaction(commit=False) as session:
            leaf = self.tlog.leaf_for_position(session, receipt.position)
        if leaf is None:  # stored before a crash, not yet sequenced
            self.tlog.catch_up()
        with self.store.transaction(commit=False) as session:
            leaf = self.tlog.leaf_for_position(session, receipt.position)
            if leaf is None:
                raise LogIntegrityError(f"event {receipt.position} was not sequenced")
            inclusion = self.tlog.inclusion(session, leaf, self.tlog.tree_size(session))
        return dataclasses.replace(receipt, inclusion=inclusion)

    # ----------------------------------------------------------------- reads

    def stored_records(
        self,
        aggregate_id: UUID,
        version: int | None = None,
        *,
        start: int = 1,
        limit: int | None = None,
        events: Sequence[str] | None = None,
        newest: bool = False,
    ) -> list[StoredRecord]:
        """Raw stored events of one aggregate, with their notification positions, in version
        order: all of them, one ``version``, or a page — from version ``start``, at most
        ``limit``, only the event classes named (``"Run.Attested"``...), or the ``newest``
        ones (still returned oldest first). Reads cost the page, not the aggregate."""
        topics = None if events is None else [topic_of(e) for e in events]
        return stored_records(
            self.store,
            aggregate_id,
            version,
            start=start,
            limit=limit,
            topics=topics,
            newest=newest,
        )

    def event_count(self, aggregate_id: UUID) -> int:
        """How many events an aggregate has (its last version; versions run 1, 2, ...)."""
        return stored_versions(self.store, {aggregate_id}).get(aggregate_id, 0)

    def stored_versions(self, ids: set[UUID]) -> dict[UUID, int]:
        """The stored version of each of these aggregates (absent: none), in one query."""
        return stored_versions(self.store, ids)

    def run(self, run_digest: str) -> Run | None:
        return self.admission.get(Run, run_id(run_digest))

    def run_manifests(self, run_digest: str) -> dict[str, Any] | None:
        """``run(run_digest).manifests()`` without replaying the run: its ingestion and
        attachments are read, its attestations are not (``ledger.run_manifests``)."""
        with self.store.transaction(commit=False) as session:
            rows = SessionRows(connection_of(session))
            return stored_run_manifests(rows, run_id(run_digest))

    def run_state(self, run_digest: str) -> RunState | None:
        """The run without replaying it: its name, manifests, lifecycle and jobs, from its
        state events (``run`` also replays every attestation: admission's own reader)."""
        return self.admission.run_state(run_id(run_digest))

    def principal(self, key_id: str) -> Principal | None:
        return self.admission.get(Principal, principal_id(key_id))

    def key_state(self, key_id: str) -> KeyState | None:
        """The key as the log holds it, with the positions of its registration and
        revocation."""
        return self.admission.key_state(key_id)

    def key_states(self, key_ids: Iterable[str]) -> dict[str, KeyState]:
        """The states of many keys (those registered), read in one query a chunk."""
        wanted = {principal_id(k): k for k in set(key_ids)}
        found = records_of(self.store, list(wanted))
        states = {wanted[a]: fold_key_events(wanted[a], records) for a, records in found.items()}
        return {k: state for k, state in states.items() if state is not None}

    def stored_states(self, event_class: type[Any]) -> Iterator[dict[str, Any]]:
        """The decoded stored fields of every event of one class, in ledger order."""
        return stored_states(self.store, topic_of(event_class.__qualname__))

    def run_index(self) -> Iterator[tuple[str, str]]:
        """(run digest, run name) of every ingested run, in ledger order."""
        for state in self.stored_states(Run.Ingested):
            yield str(state.get("run_digest")), str(state.get("run_name"))

    def key_ids(self) -> list[str]:
        return [str(state.get("key_id")) for state in self.stored_states(Principal.Registered)]

    def require_run(self, run_digest: str) -> str:
        """``run_digest`` if a run was ingested under it (``ledger.history_reads``)."""
        with self.store.transaction(commit=False) as session:
            return require_run(SessionRows(connection_of(session)), run_digest)
