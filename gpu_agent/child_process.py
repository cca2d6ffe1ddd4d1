"""Run one function in a child process of its own, with a time limit: the harness's isolation.

The child sends back ``("ok", result)`` or ``("agent-error", text)`` through a pipe; a child
that dies before reporting, or outlives its time limit (it is then killed), is reported as
such, so a sticky CUDA error, a crash or a hang costs only that child.

With ``sandboxed=True`` (every child that will hold submitted Python) the parent makes a
fresh temporary working directory, the child enters the sandbox of
``gpu_agent/python_solutions/sandbox.py`` (scrubbed environment and argv, that directory,
resource limits) before it runs anything else, and the parent removes the directory once the
child is gone, however it ended: the one place where a case child is made safe to hold code.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import signal
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from gpu_agent.python_solutions.sandbox import Limits, SandboxSpec, enter

# Preloaded by a forkserver: the harness imports numpy and every function a child runs, and no
# backend (backends are imported in each child); torch where installed (it touches no device).
FORKSERVER_PRELOAD = ["gpu_agent.harness", "gpu_agent.python_solutions.preload"]


@dataclass(frozen=True)
class ChildResult:
    kind: str  # "ok", "agent-error", "died", "timeout"
    value: Any = None
    detail: str = ""


def child_main(
    conn: Connection,
    target: Callable[[Any], Any],
    payload: Any,
    sandbox: SandboxSpec | None = None,
) -> None:
    """The child's entry point: enter the sandbox if asked, run ``target(payload)`` and
    report how it went."""
    try:
        if sandbox is not None:
            enter(sandbox)
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
    """``target(payload)`` in a fresh child started by ``start_method``, waited on at most
    ``timeout_s`` seconds; in the sandbox (with ``limits``) when ``sandboxed``."""
    if not sandboxed:
        return _run_child(target, payload, timeout_s, start_method, None)
    with tempfile.TemporaryDirectory(prefix="kernelindex-case-") as workdir:
        spec = SandboxSpec(workdir, limits or Limits())
        return _run_child(target, payload, timeout_s, start_method, spec)


def _run_child(
    target: Callable[[Any], Any],
    payload: Any,
    timeout_s: float,
    start_method: str,
    sandbox: SandboxSpec | None,
) -> ChildResult:
    context = _context(start_method)
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(  # type: ignore[attr-defined]
        target=child_main, args=(sender, target, payload, sandbox), daemon=True
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
