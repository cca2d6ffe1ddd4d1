"""Both ends of the pipe between the agent and a jailed case child (gpu_agent/jail.py).

Why a protocol of its own instead of multiprocessing's: multiprocessing unpickles what the
child sends, and a child holding submitted code must never make the agent run code of its
choosing. So the task goes *in* pickled (the agent's own data, read by its own code before any
submitted code exists in the child), and the outcome comes *back* as bounded JSON, read as
data and checked field by field against :class:`~gpu_agent.case_task.CaseOutcome`.

Frames are a 4-byte big-endian length and that many bytes, on a pipe of their own (not
stdout, which the solution may write to). The child writes two: :data:`READY` once it has
read its task and entered the sandbox — before it runs anything submitted, so a child that
dies before it is the agent's failure, one that dies after it the case's — and then its
report, ``{"kind": "ok", "outcome": {...}}`` or ``{"kind": "agent-error", "detail": "..."}``.
The agent believes neither blindly: it takes an agent-error after READY as the case's invalid
report (the solution could have written it), and judges an ok outcome's timing itself
(``result_assembly.checked_timing``).
After READY the child's stdout and stderr go to /dev/null: the agent reads nothing the
solution prints.

Run as ``python -I -c <boot> RESULT_FD`` (:func:`gpu_agent.jail.python_argv`), the task on
stdin.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import sys
import traceback
import types
import typing
from collections.abc import Callable
from typing import IO, Any

from gpu_agent.case_task import CaseOutcome
from gpu_agent.python_solutions.sandbox import SandboxSpec, enter

READY = b"ready"
MAX_TASK_BYTES = 256 * 1024 * 1024  # sources and documents, from the agent
MAX_REPORT_BYTES = 16 * 1024 * 1024  # an outcome: samples, defences, build
MAX_DETAIL_CHARS = 4_000


class ProtocolError(Exception):
    """What the child sent is not a report this protocol knows."""


def frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def read_frame(stream: IO[bytes], limit: int) -> bytes:
    """One frame from a blocking stream (the child reads its task so)."""
    head = stream.read(4)
    if len(head) != 4:
        raise ProtocolError("the stream ended before a frame")
    size = int.from_bytes(head, "big")
    if size > limit:
        raise ProtocolError(f"a frame of {size} bytes is over the limit of {limit}")
    data = stream.read(size)
    if len(data) != size:
        raise ProtocolError("the stream ended inside a frame")
    return data


class FrameReader:
    """Frames from bytes as they arrive (the agent reads the child's pipe so, with a
    deadline): at most ``limit`` bytes a frame, never more buffered than one frame."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        frames: list[bytes] = []
        while len(self.buffer) >= 4:
            size = int.from_bytes(self.buffer[:4], "big")
            if size > self.limit:
                raise ProtocolError(f"a frame of {size} bytes is over the limit of {self.limit}")
            if len(self.buffer) < 4 + size:
                break
            frames.append(bytes(self.buffer[4 : 4 + size]))
            del self.buffer[: 4 + size]
        return frames


# --- the outcome as data ---------------------------------------------------------------------


def outcome_to_json(outcome: CaseOutcome) -> dict[str, Any]:
    return dataclasses.asdict(outcome)


_HINTS = typing.get_type_hints(CaseOutcome)


_SCALARS: dict[Any, Callable[[Any], bool]] = {
    str: lambda v: isinstance(v, str),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    type(None): lambda v: v is None,
    Any: lambda _: True,
}


def _fits(value: Any, hint: Any) -> bool:
    """Whether JSON ``value`` has the shape ``hint`` describes (str, float, int, None,
    list[...], dict[str, ...], unions, Any)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is list:
        return isinstance(value, list) and all(_fits(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            isinstance(k, str) and _fits(v, args[1]) for k, v in value.items()
        )
    check = _SCALARS.get(hint)
    return check is not None and check(value)


def outcome_from_json(data: Any) -> CaseOutcome:
    """The CaseOutcome ``data`` describes; ProtocolError for anything else."""
    if not isinstance(data, dict) or not isinstance(data.get("status"), str):
        raise ProtocolError("an outcome is an object with a status")
    unknown = set(data) - set(_HINTS)
    if unknown:
        raise ProtocolError(f"unknown outcome fields {sorted(unknown)[:5]}")
    for name, value in data.items():
        if not _fits(value, _HINTS[name]):
            raise ProtocolError(f"outcome field {name!r} has the wrong shape")
    floats = {n for n, h in _HINTS.items() if h in (float, float | None)}
    fields: dict[str, Any] = {
        n: float(v) if n in floats and v is not None else v for n, v in data.items()
    }
    return CaseOutcome(**fields)


def parse_report(data: bytes) -> tuple[str, Any]:
    """``("ok", CaseOutcome)`` or ``("agent-error", text)`` from the child's report."""
    try:
        report = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"the report is not JSON: {exc}") from None
    if not isinstance(report, dict):
        raise ProtocolError("the report is not an object")
    if report.get("kind") == "ok":
        return "ok", outcome_from_json(report.get("outcome"))
    if report.get("kind") == "agent-error" and isinstance(report.get("detail"), str):
        return "agent-error", report["detail"][:MAX_DETAIL_CHARS]
    raise ProtocolError("the report is neither ok nor agent-error")


# --- the child's side ------------------------------------------------------------------------


def _silence() -> None:
    """stdin, stdout and stderr to /dev/null: the agent reads nothing more from them."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def main(result_fd: int) -> None:
    report = os.fdopen(result_fd, "wb", buffering=0)
    task: tuple[Callable[[Any], CaseOutcome], Any, SandboxSpec] = pickle.loads(  # noqa: S301
        read_frame(sys.stdin.buffer, MAX_TASK_BYTES)  # the agent's own data
    )
    target, payload, spec = task
    enter(spec)
    report.write(frame(READY))
    _silence()
    try:
        outcome = target(payload)
        reply: dict[str, Any] = {"kind": "ok", "outcome": outcome_to_json(outcome)}
    except BaseException as exc:  # the agent's failure (AgentFault, a bug): reported as such
        detail = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        reply = {"kind": "agent-error", "detail": detail[-MAX_DETAIL_CHARS:]}
    report.write(frame(json.dumps(reply, allow_nan=True).encode("utf-8")))
    report.close()


if __name__ == "__main__":
    main(int(sys.argv[1]))
    # Threads the solution left behind must not keep the child alive after it reported.
    os._exit(0)
