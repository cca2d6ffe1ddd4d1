"""Where the serve-child's time goes: self time per named stage (the ledger's through
``ledger.timing``; the edge's and the writer queue's by wrapping), summed over timed requests.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from typing import Any, cast

from benchmarks.http.config import STAMPS, TIMED_HEADER, F
from ledger import timing
from ledger.timing import Stage

# ------------------------------------------------------------------- server-side timings


class Spans:
    """Wall time per named stage, exclusive of nested stages, summed over all calls.

    Stages nest (an aggregate load inside the signature check inside authorisation), so
    each stage keeps its *self* time: its wall time minus that of the stages it called.
    The self times of everything under ``service.append`` then add up to its total, which
    makes a breakdown without double counting. A per-thread stack holds the time of the
    children of each open stage; totals are shared by every thread under one lock. Nothing
    counts until ``active`` (see TIMED_HEADER).
    """

    def __init__(self) -> None:
        self.self_s: defaultdict[str, float] = defaultdict(float)
        self.total_s: defaultdict[str, float] = defaultdict(float)
        self.cpu_s: defaultdict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self.raised: Counter[str] = Counter()
        # Side counters: not stages (they cut across them), e.g. every SQL statement.
        self.side_s: defaultdict[str, float] = defaultdict(float)
        self.side_calls: Counter[str] = Counter()
        # Notes: a value per call (e.g. the size of each committed group): sum, count, max.
        self.notes: dict[str, list[float]] = {}
        self.requests = 0
        self.request_s = 0.0
        # Of request_s: before the handler reached service.append, and after it returned.
        self.before_s = 0.0
        self.after_s = 0.0
        self.active = False
        self._lock = threading.Lock()
        self._local = threading.local()

    def _stack(self) -> list[float]:
        stack: list[float] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def record(self, name: str, elapsed: float, children: float = 0.0, cpu: float = 0.0) -> None:
        stack = self._stack()
        if stack:
            stack[-1] += elapsed
        if not self.active:
            return
        with self._lock:
            self.self_s[name] += elapsed - children
            self.total_s[name] += elapsed
            self.calls[name] += 1
            self.cpu_s[name] += cpu

    def wrap(self, name: str, fn: F, *, cpu: bool = False) -> F:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = self._stack()
            stack.append(0.0)
            cpu0 = time.thread_time() if cpu else 0.0
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            except BaseException:
                if self.active:
                    with self._lock:
                        self.raised[name] += 1
                raise
            finally:
                elapsed = time.perf_counter() - started
                used = time.thread_time() - cpu0 if cpu else 0.0
                self.record(name, elapsed, stack.pop(), used)

        return timed  # type: ignore[return-value]

    # ledger.timing.Probe: the ledger's own stages, named by LEDGER_STAGES.
    def begin(self, stage: Stage) -> object:
        self._stack().append(0.0)
        cpu = time.thread_time() if stage in CPU_STAGES else 0.0
        return (time.perf_counter(), cpu)

    def end(self, stage: Stage, began: object, raised: bool) -> None:
        started, cpu0 = cast("tuple[float, float]", began)
        elapsed = time.perf_counter() - started
        used = time.thread_time() - cpu0 if stage in CPU_STAGES else 0.0
        name = LEDGER_STAGES[stage]
        if raised and self.active:
            with self._lock:
                self.raised[name] += 1
        self.record(name, elapsed, self._stack().pop(), used)

    def side(self, name: str, fn: F) -> F:
        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                if self.active:
                    with self._lock:
                        self.side_s[name] += elapsed
                        self.side_calls[name] += 1

        return counted  # type: ignore[return-value]

    def note(self, name: str, value: float) -> None:
        if not self.active:
            return
        with self._lock:
            total, count, most = self.notes.get(name, [0.0, 0.0, 0.0])
            self.notes[name] = [total + value, count + 1, max(most, value)]

    def wrap_asgi(self, app: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        """Time each HTTP request inside the ASGI app (framework, thread hop, handler)."""

        async def timed(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http" or not any(
                name == TIMED_HEADER for name, _ in scope.get("headers", ())
            ):
                await app(scope, receive, send)
                return
            self.active = True
            stamps: dict[str, float] = {}
            token = STAMPS.set(stamps)
            started = time.perf_counter()
            try:
                await app(scope, receive, send)
            finally:
                ended = time.perf_counter()
                STAMPS.reset(token)
                with self._lock:
                    self.requests += 1
                    self.request_s += ended - started
                    if "enter" in stamps and "exit" in stamps:
                        self.before_s += stamps["enter"] - started
                        self.after_s += ended - stamps["exit"]

        return timed

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "switchInterval": sys.getswitchinterval(),
            "requests": {
                "count": self.requests,
                "seconds": self.request_s,
                "beforeHandlerSeconds": self.before_s,
                "afterHandlerSeconds": self.after_s,
            },
            "spans": {
                name: {
                    "calls": self.calls[name],
                    "selfSeconds": self.self_s[name],
                    "totalSeconds": self.total_s[name],
                    "cpuSeconds": self.cpu_s[name],
                    "raised": self.raised[name],
                }
                for name in self.calls
            },
            "side": {
                name: {"calls": self.side_calls[name], "seconds": self.side_s[name]}
                for name in self.side_calls
            },
            "notes": {
                name: {"sum": total, "count": count, "max": most}
                for name, (total, count, most) in self.notes.items()
            },
        }


# Stage names. Request threads: the edge checks, then waiting for the group commit writer.
# The writer thread: one group at a time, its stages summed over all groups (then divided by
# the number of appends for a per-append figure).
S_SERVICE = "service.append: edge checks (the one envelope parse, endpoint/subject match)"
S_WAIT = "waiting for the writer thread (queue, groups ahead, own group)"
S_GROUP = "append_many: group loop, overlay, received times, receipts"
S_KEYS = "key reuse check (one query per group)"
S_PARSE = "envelope parse (base64, JSON, statement)"
S_GET = "aggregate loads (repository.get: cache copy + fast-forward SELECT)"
S_PREDICATE = "predicate schema (pydantic)"
S_AUTHORIZE = "authorisation (key record, validity, role)"
S_VERIFY = "Ed25519 signature check"
S_COMMIT_FN = "_commit: transaction begin/end"
S_SAVE = "event INSERT (save: serialise, insert)"
S_SEQUENCE = "log sequencing (lock, SELECT max x2, event read, leaf+node INSERT)"
S_PROOF = "inclusion proofs (leaf lookup, one node query per group)"
S_DB_COMMIT = "COMMIT (WAL write + fsync)"
S_SQL = "SQL statements (driver execute)"
LEDGER_STAGES: dict[Stage, str] = {
    Stage.GROUP: S_GROUP,
    Stage.KEYS: S_KEYS,
    Stage.PARSE: S_PARSE,
    Stage.GET: S_GET,
    Stage.PREDICATE: S_PREDICATE,
    Stage.AUTHORIZE: S_AUTHORIZE,
    Stage.VERIFY: S_VERIFY,
    Stage.COMMIT: S_COMMIT_FN,
    Stage.SAVE: S_SAVE,
    Stage.SEQUENCE: S_SEQUENCE,
    Stage.PROOF: S_PROOF,
}
CPU_STAGES = {Stage.GROUP}
N_GROUP = timing.GROUP_SIZE
REQUEST_STAGES = (S_SERVICE, S_WAIT)
# The writer thread's stages in report order: the ledger's own, then the driver's COMMIT.
WRITER_STAGES = (*LEDGER_STAGES.values(), S_DB_COMMIT)


def instrument(service: Any) -> Spans:
    """Time the stages of an append in this (serve-child) process: the ledger's own through
    its timing hooks (``ledger.timing``); the HTTP edge's and the writer queue's, which are
    not stages of the ledger, by wrapping three public or edge methods (a rename fails here,
    loudly); the driver's COMMIT and statements by wrapping the dialect."""
    from api.server import service as service_module  # noqa: PLC0415

    spans = Spans()
    timing.install(spans)  # the ledger's stages (ledger.timing), timed where the ledger says
    # The write handlers are async: the edge checks run on the event loop, then the handler
    # awaits the writer's future without holding a thread.
    checked = service_module.LedgerService._checked
    service_module.LedgerService._checked = staticmethod(  # type: ignore[method-assign]
        spans.wrap(S_SERVICE, checked)
    )
    writer_class = type(service.writer)  # the writer thread, or the writer process's handle

    def timed(submit: Any) -> Any:
        @functools.wraps(submit)
        def timed_submit(self: Any, envelope: Any) -> Any:
            started = time.perf_counter()
            future = submit(self, envelope)
            future.add_done_callback(lambda _: spans.record(S_WAIT, time.perf_counter() - started))
            return future

        return timed_submit

    # ``submit`` (a thread's future), and the writer process's handle's ``submit_async`` (an
    # asyncio future, answered a batch at a time), which the async handler awaits.
    for name in ("submit", "submit_async"):
        if hasattr(writer_class, name):
            setattr(writer_class, name, timed(getattr(writer_class, name)))
    service_append = service_module.LedgerService.append_async

    @functools.wraps(service_append)
    async def stamped(*args: Any, **kwargs: Any) -> Any:
        stamps = STAMPS.get()
        if stamps is not None:
            stamps["enter"] = time.perf_counter()
        try:
            return await service_append(*args, **kwargs)
        finally:
            if stamps is not None:
                stamps["exit"] = time.perf_counter()

    service_module.LedgerService.append_async = stamped  # type: ignore[method-assign]
    # The driver-level calls: COMMIT as a stage of its own; every statement as a side
    # counter (statements run inside every stage, so they cannot be a stage themselves).
    dialect = service.ledger.store.engine.dialect
    dialect.do_commit = spans.wrap(S_DB_COMMIT, dialect.do_commit)
    for attribute in ("do_execute", "do_executemany", "do_execute_no_params"):
        setattr(dialect, attribute, spans.side(S_SQL, getattr(dialect, attribute)))
    return spans
