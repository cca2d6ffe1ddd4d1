"""Run one function in a child process of its own, with a time limit: the harness's isolation.

A child that dies before reporting, or outlives its time limit (it is then killed), is
reported as such, so a sticky CUDA error, a crash or a hang costs only that child.

Two kinds of child. With ``sandboxed=True`` — every child that will hold submitted code (a
case: the Python solution it imports, the CUDA source it compiles and launches) — the child
is exec'd fresh inside the jail of ``gpu_agent/jail.py`` (its own user, PID, mount, IPC and
network namespaces), in a fresh working directory the parent makes and removes once the child
is gone, however it ended; it enters the sandbox of ``gpu_agent/python_solutions/sandbox.py``
(scrubbed environment, resource limits) before anything else, and talks to the agent only
through the framed pipe of ``gpu_agent/jailed_child.py``: the task in, a bounded JSON outcome
back, never unpickled. A child that fails before READY is the agent's failure
(``agent-error``); after READY a solution that runs in the child's process may write the
report itself, so a malformed report is ``invalid-report`` (the case's error) and a reported
agent failure is ``late-agent-error``, which the harness believes only where no submitted
code ran on the host. Where the jail does not work, such a child is never started: the
result is the agent's failure (``agent-error``, "no sandbox available").

Without ``sandboxed`` (the device probe: the agent's own code only) the child is a
multiprocessing child (``spawn`` or ``forkserver``: both exec a fresh interpreter, never a
fork of the agent that loaded the key), and reports ``("ok", result)`` or
``("agent-error", text)`` through a multiprocessing pipe.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import pickle
import select
import signal
import subprocess
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import IO, Any

from gpu_agent import jail
from gpu_agent.backends.registry import CPU_TEST
from gpu_agent.case_task import CaseOutcome
from gpu_agent.jailed_child import (
    MAX_REPORT_BYTES,
    READY,
    FrameReader,
    ProtocolError,
    frame,
    parse_report,
)
from gpu_agent.python_solutions.sandbox import Limits, SandboxSpec

# Preloaded by a forkserver: the harness imports numpy and every function a child runs, and no
# backend (backends are imported in each child). No torch: no case child is forked from it.
FORKSERVER_PRELOAD = ["gpu_agent.harness"]
# How much of a jailed child's stderr the agent keeps: only what it wrote before READY (the
# agent's own code, e.g. an import failing in the jail), for the agent's failure message.
MAX_STARTUP_LOG = 4_000
# How long a jailed child may take to be READY (start the jail and the interpreter, read its
# task): the agent's own start-up, not counted in the case's time limit.
STARTUP_TIMEOUT_S = 120.0
_READ_CHUNK = 1 << 16


# What the agent says of a jailed child's malformed report (fixed: no child's text).
INVALID_REPORT = "sent a malformed report after it was ready: the case is an invalid report"


@dataclass(frozen=True)
class ChildResult:
    # "ok", "agent-error", "died", "timeout"; for a jailed child, "invalid-report" (a
    # malformed report) and "late-agent-error" (it reported an agent failure after READY,
    # when submitted code may have been writing the report: see harness.child_outcome).
    kind: str
    value: Any = None
    detail: str = ""


def child_main(conn: Connection, target: Callable[[Any], Any], payload: Any) -> None:
    """An unjailed child's entry point: run ``target(payload)`` and report how it went."""
    try:
        result = target(payload)
        conn.send(("ok", result))
    except BaseException as exc:
        conn.send(("agent-error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    finally:
        conn.close()


def describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _context(start_method: str) -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context(start_method)
    if isinstance(context, multiprocessing.context.ForkServerContext):
        # Takes effect when the server starts (once per agent process).
        context.set_forkserver_preload(FORKSERVER_PRELOAD)
    return context


def in_child(
    target: Callable[[Any], Any],
    payload: Any,
    timeout_s: float,
    start_method: str = "spawn",
    *,
    sandboxed: bool = False,
    limits: Limits | None = None,
) -> ChildResult:
    """``target(payload)`` in a fresh child, waited on at most ``timeout_s`` seconds.

    ``sandboxed``: in the jail (see the module doc), with ``limits``; ``target`` must then
    return a CaseOutcome and ``start_method`` is not used (a jailed child is always exec'd).
    Otherwise a multiprocessing child started by ``start_method``."""
    if not sandboxed:
        return _run_child(target, payload, timeout_s, start_method)
    return run_jailed(target, payload, timeout_s, limits or Limits())


def _run_child(
    target: Callable[[Any], Any], payload: Any, timeout_s: float, start_method: str
) -> ChildResult:
    context = _context(start_method)
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(  # type: ignore[attr-defined]
        target=child_main, args=(sender, target, payload), daemon=True
    )
    process.start()
    sender.close()  # so the receiver sees EOF when the child dies
    try:
        if not receiver.poll(timeout_s):
            return ChildResult("timeout", detail=f"no result within {timeout_s:g} s")
        try:
            kind, value = receiver.recv()
        except EOFError:
            process.join(10)
            return ChildResult("died", detail=describe_exit(process.exitcode))
        return ChildResult(kind, value)
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
        process.join(10)


# --- jailed children -------------------------------------------------------------------------


def jail_needs(payload: Any) -> tuple[bool, list[str]]:
    """What the jail must hold for a case task: the GPU (any backend but cpu-test), and the
    modules the task names (its reference module, the cpu-test backend's emulations)."""
    gpu = getattr(payload, "backend_name", CPU_TEST) != CPU_TEST
    options = getattr(payload, "backend_options", {}) or {}
    modules = [getattr(payload, "reference_module", "")]
    modules += str(options.get("emulation_modules", "")).split(",")
    return gpu, [m for m in modules if m]


def run_jailed(
    target: Callable[[Any], CaseOutcome], payload: Any, timeout_s: float, limits: Limits
) -> ChildResult:
    """``target(payload)`` in a jailed child (see the module doc)."""
    refusal = jail.unavailable()
    if refusal is not None:
        return ChildResult("agent-error", refusal)
    gpu, modules = jail_needs(payload)
    task = pickle.dumps((target, payload, SandboxSpec(jail.WORKDIR, limits)))
    with tempfile.TemporaryDirectory(prefix="kernelindex-case-") as workdir:
        report_read, report_write = os.pipe()
        try:
            roots = jail.import_roots(modules)
            argv = jail.python_argv(roots, "gpu_agent.jailed_child", str(report_write))
            jailed = jail.command(argv, workdir, gpu=gpu, modules=modules)
        except jail.UnsafeMount as exc:  # nothing started: the agent's own setup is at fault
            os.close(report_read)
            os.close(report_write)
            return ChildResult("agent-error", f"{jail.NO_SANDBOX}: {exc}")
        try:
            process = subprocess.Popen(  # noqa: S603 - argv built here, no shell
                jailed,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(report_write,),
            )
        except BaseException:
            os.close(report_read)
            raise
        finally:
            os.close(report_write)
        try:
            return _Watch(process, report_read).result(task, timeout_s)
        finally:
            os.close(report_read)
            if process.poll() is None:
                process.kill()  # the jail's init dies with it, and every process inside
            process.wait(10)


class _Watch:
    """The agent's side of one jailed child: its task in, its frames out, its end."""

    def __init__(self, process: subprocess.Popen[bytes], report: int) -> None:
        self.process = process
        self.report = report
        self.deadline = time.monotonic() + STARTUP_TIMEOUT_S
        self.reader = FrameReader(MAX_REPORT_BYTES)
        self.frames: list[bytes] = []
        assert process.stderr is not None
        self.startup_log = _Drain(process.stderr)

    def result(self, task: bytes, timeout_s: float) -> ChildResult:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(frame(task))
            self.process.stdin.close()
        except BrokenPipeError:
            pass  # the child is already gone: its exit says why
        try:
            started = self._wait_for_frames(1) and self.frames[0] == READY
        except ProtocolError:
            started = False
        if not started:
            return self._not_started()
        self.deadline = time.monotonic() + timeout_s  # the case's own time starts now
        try:
            if not self._wait_for_frames(2):
                if time.monotonic() >= self.deadline:
                    return ChildResult("timeout", detail=f"no result within {timeout_s:g} s")
                return ChildResult("died", detail=describe_exit(self._exit_code()))
            kind, value = parse_report(self.frames[1])
        except ProtocolError:
            return ChildResult("invalid-report", detail=INVALID_REPORT)
        if kind != "ok":
            # After READY, submitted host code (a Python solution) may have written it: the
            # caller decides whether this child's word on an agent failure can be taken.
            return ChildResult("late-agent-error", value)
        return ChildResult(kind, value)

    def _wait_for_frames(self, count: int) -> bool:
        """Read until ``count`` frames have come (True), or EOF or the deadline (False)."""
        while len(self.frames) < count:
            left = self.deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self.report], [], [], left)
            if not ready:
                return False
            data = os.read(self.report, _READ_CHUNK)
            if not data:
                return False
            self.frames += self.reader.feed(data)
        return True

    def _exit_code(self) -> int | None:
        try:
            return self.process.wait(10)
        except subprocess.TimeoutExpired:
            return None

    def _not_started(self) -> ChildResult:
        """No READY: the child failed before any submitted code ran — the agent's failure."""
        if time.monotonic() >= self.deadline:
            why = f"did not start within {STARTUP_TIMEOUT_S:g} s"
        else:
            why = describe_exit(self._exit_code())
        log = self.startup_log.text()
        return ChildResult(
            "agent-error", f"the jailed case child {why} before it was ready: {log}".strip()
        )


class _Drain:
    """Reads a pipe to its end in a thread, keeping its first :data:`MAX_STARTUP_LOG` bytes
    (the child sends its stderr to /dev/null once ready, so only its startup is here)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.kept = bytearray()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        with stream:
            while chunk := stream.read(_READ_CHUNK):
                room = MAX_STARTUP_LOG - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]

    def text(self) -> str:
        self.thread.join(5)
        return self.kept.decode("utf-8", errors="replace")
