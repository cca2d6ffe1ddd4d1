"""The one door to a ledger that every face calls: the CLI, the HTTP API and the pages.

Plain Python calls that answer the typed reply models (``api.service.models``), grouped by
feature: ``runs``, ``history``, ``boards``, ``search``, ``compare``, ``keys``, ``log``,
``jobs``, ``records``, ``registry``, ``admin`` (the operator's maintenance:
``api.service.admin``); the writes are the service's own methods. The service owns the
rules of the edge: which statement a write endpoint accepts, one writer per process, and
how fresh the read models are when it reads them (``api.service.freshness``: decided there,
once per request).

A server makes its service with ``background=True``: its views are folded by a thread of
their own and its reads never write. A command makes it without: its reads fold what is new
first, as commands always did.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

from api.service import features
from api.service.errors import WriterClosedError, WrongEndpointError
from api.service.features import Feature
from api.service.freshness import Views
from api.service.models.log import Health
from domain.documents import parse_json
from domain.statements import PredicateType
from ledger.admission_checks import Checked, KnownKeys, check_stateless
from ledger.application import Ledger
from ledger.group_commit import GroupCommitWriter, Writer
from ledger.home import HomeError, LedgerHome
from ledger.logged_event import LoggedEvent
from ledger.signing.dsse import MAX_ENVELOPE_BYTES, Envelope, parse_envelope
from ledger.witness.policy import Policy, PolicyError, parse_policy

# Bodies up to this size are parsed on the event loop (an attestation is ~2 KiB, an
# ingestion of a typical run ~5 KiB); larger ones, up to the 2 MiB cap, on a thread.
INLINE_PARSE_BYTES = 64 * 1024


class LedgerService:
    def __init__(
        self,
        ledger: Ledger,
        writer: Writer | None = None,
        *,
        public_url: str | None = None,
        background: bool = False,
        home: LedgerHome | None = None,
        witnessing: bool = False,
    ) -> None:
        """``home``: where the ledger's witness policy is read (its ``witness-policy``
        file, else its trust root's); without one, the ledger's trust root's.
        ``witnessing``: the writer thread this service starts asks those witnesses to
        cosign each checkpoint (a server's; a command that writes once asks no one)."""
        self.ledger = ledger
        self._writer = writer
        # The public keys of registered key ids, for the signature check made here.
        self._known_keys = KnownKeys(ledger.key_states)
        self._writer_made = threading.Lock()
        self.witness_policy = witness_policy_of(ledger, home)
        self._witnessing = witnessing
        self.views = Views(ledger, background=background)
        self.public_url = public_url or ""
        self.features_made = threading.RLock()  # api.service.features.Feature's

    # The features, each made on first use (its module imported then): a command uses one
    # or two, and importing every one was about a python -c pass of its start-up.
    runs = Feature(features.runs)
    history = Feature(features.history)
    boards = Feature(features.boards)
    compare = Feature(features.compare)
    search = Feature(features.search)
    keys = Feature(features.keys)
    log = Feature(features.log)
    jobs = Feature(features.jobs)
    admin = Feature(features.admin)
    records = Feature(features.records)  # the #1 records timeline
    registry = Feature(features.registry)  # GPUs and implementations

    @property
    def writer(self) -> Writer:
        """One writer commits concurrent requests in groups: the ledger's writer process
        (``kernelindex serve`` gives it), else a writer thread of this process, started at
        the first write (a command that only reads starts none); across processes
        (PostgreSQL) the ledger's own retry and log lock keep writers consistent."""
        with self._writer_made:
            if self._writer is None:
                self._start_witnessing()
                self._writer = GroupCommitWriter(self.ledger)
            return self._writer

    def _start_witnessing(self) -> None:
        """The writer thread's commits are offered to the ledger's witnesses, as the
        ledger's writer process offers its own (``LedgerHome.open(witnessing=True)``)."""
        policy = self.witness_policy
        ledger = self.ledger
        if not self._witnessing or policy is None or ledger.witnessing is not None:
            return
        if ledger.read_only or not ledger.tlog.can_sign:
            return  # it signs no checkpoints: nothing to offer
        # Imported here: the HTTP client it loads is no part of a service that only reads.
        from ledger.witness.client import WitnessEndpoint  # noqa: PLC0415

        endpoints = [WitnessEndpoint(w.url, w.key) for w in policy.witnesses if w.url]
        if endpoints:
            ledger.start_witnessing(endpoints)

    def start(self) -> None:
        """Start what serves in the background: a server's views folder, and (a server
        that writes itself) the asking of its witnesses, so that what was left uncosigned
        before a restart is offered without waiting for a write."""
        self.views.start()
        with self._writer_made:
            if self._writer is None:  # a writer given (a writer process) asks its own
                self._start_witnessing()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self.views.stop()
        log = Feature.made(self, "log")
        if log is not None:
            log.close()

    # ---------------------------------------------------------------- writes

    def append(
        self, body: bytes, accepts: set[PredicateType], subject: str | None = None
    ) -> LoggedEvent:
        """Admit a signed envelope posted to an endpoint for ``accepts`` about ``subject``."""
        logged = self.writer.append(self._stateless(self._checked(body, accepts, subject)))
        self.views.written()
        return logged

    async def append_async(
        self,
        body: bytes,
        accepts: set[PredicateType],
        subject: str | None = None,
        *,
        before_queue: Callable[[str], None] | None = None,
    ) -> LoggedEvent:
        """The same, awaiting the group commit instead of blocking a worker thread (the
        parse of a large body runs off the event loop; a small one, a fraction of a
        millisecond, on it: the thread hop cost more than the parse). The body is parsed
        once: the ledger admits the parsed envelope as it is. ``before_queue`` sees the key id
        the envelope names (not yet verified) before it is queued: the rate limit's check,
        made before the stateless checks (the signature's among them), which run here, in
        this worker, not in the writer (``ledger.admission_checks``)."""
        inline = len(body) <= INLINE_PARSE_BYTES
        if inline:
            envelope = self._checked(body, accepts, subject)
        else:
            envelope = await asyncio.to_thread(self._checked, body, accepts, subject)
        if before_queue is not None:
            before_queue(envelope.keyid)
        # On the event loop only when nothing is read from the database: a key the worker
        # has not read yet is looked up from a thread.
        checked = (
            self._stateless(envelope)
            if inline and not self._known_keys.needs_read(envelope.keyid)
            else await asyncio.to_thread(self._stateless, envelope)
        )
        # The writer process's handle answers the loop's callers a batch at a time, and
        # sends what one loop turn submitted as one write (``RemoteWriter.submit_async``).
        submit: Callable[[object], Awaitable[LoggedEvent]] | None = getattr(
            self.writer, "submit_async", None
        )
        if submit is not None:
            logged = await submit(checked)
        else:
            logged = await asyncio.wrap_future(self.writer.submit(checked))
        self.views.written()
        return logged

    @staticmethod
    def signer_of_receipt(receipt: LoggedEvent) -> str | None:
        """Who really signed an accepted write (a fresh one: replays cost nothing)."""
        if receipt.duplicate or not receipt.signer:
            return None
        return receipt.signer

    def _stateless(self, envelope: Envelope) -> Checked:
        """The stateless checks of admission, here; a refusal they know whatever the log
        holds is answered here, without the writer (``Checked.refusal``)."""
        checked = check_stateless(envelope, self._known_keys)
        refusal = checked.refusal()
        if refusal is not None:
            raise refusal
        return checked

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

    @staticmethod
    def job_claimed_in(body: bytes) -> str | None:
        """The job id a posted claim names (its full admission happens in the ledger)."""
        envelope = parse_envelope(parse_json(body, max_bytes=MAX_ENVELOPE_BYTES))
        predicate = envelope.statement().predicate
        job_id = predicate.get("jobId") if isinstance(predicate, dict) else None
        return job_id if isinstance(job_id, str) else None

    # ---------------------------------------------------------------- health

    def health(self) -> Health:
        """The database answers, the log is readable and writes can be taken."""
        # A server that hands its writes to the ledger's writer process (SQLite) cannot take
        # one while it does not reach that process: not healthy, whatever the reads say.
        from ledger.writer_process import RemoteWriter  # noqa: PLC0415 - multiprocessing

        if isinstance(self.writer, RemoteWriter) and not self.writer.connected:
            raise WriterClosedError(
                "the ledger's writer process is not reachable: writes are refused until it "
                "runs again (the server starts it again, or exits saying why)"
            )
        with self.ledger.store.transaction(commit=False) as session:
            size = self.ledger.tlog.tree_size(session)
        return Health(
            status="ok",
            origin=self.ledger.trust_root.origin,
            tree_size=size,
            database=self.ledger.store.engine.dialect.name,
        )


def witness_policy_of(ledger: Ledger, home: LedgerHome | None) -> Policy | None:
    """The ledger's witness policy: its home's, else its trust root's; None: no witnesses."""
    if home is not None:
        return home.witness_policy()
    text = ledger.trust_root.witness_policy
    if text is None:
        return None
    try:
        return parse_policy(text)
    except PolicyError as exc:
        raise HomeError(f"the trust root's witness policy: {exc.message}") from None
