"""Named stages of a write, timed only when a probe is installed (the benchmarks' breakdown
of where an append's time goes, ``benchmarks/bench_http.py``); otherwise each costs one
global lookup. The ledger says where its stages are; a benchmark never rebinds its names."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import ParamSpec, Protocol, TypeVar

R = TypeVar("R")
PS = ParamSpec("PS")


class Stage(StrEnum):
    GROUP = "group"  # Ledger.append_many: a whole group, retries included
    KEYS = "keys"  # the query that shows which signer keys read before are unchanged
    PARSE = "parse"  # envelope: base64, JSON, statement schema
    GET = "get"  # an aggregate load (cache, or repository get and fast-forward)
    PREDICATE = "predicate"  # predicate schema
    AUTHORIZE = "authorize"  # who signed, may they say this now
    VERIFY = "verify"  # one Ed25519 signature check
    COMMIT = "commit"  # the transaction that stores and sequences a group
    SAVE = "save"  # serialise and INSERT the events
    SEQUENCE = "sequence"  # the log's new leaves and nodes
    PROOF = "proof"  # inclusion proofs for the group's receipts


class Probe(Protocol):
    def begin(self, stage: Stage) -> object: ...

    def end(self, stage: Stage, began: object, raised: bool) -> None: ...

    def note(self, name: str, value: float) -> None: ...


_probe: Probe | None = None


def install(probe: Probe | None) -> None:
    """Time every stage with ``probe`` from now on (None: stop timing)."""
    global _probe  # noqa: PLW0603 - one probe per process, by design
    _probe = probe


def note(name: str, value: float) -> None:
    """A value per call (e.g. the size of each group), summed by the probe."""
    probe = _probe
    if probe is not None:
        probe.note(name, value)


GROUP_SIZE = "group size"


def timed(stage: Stage) -> Callable[[Callable[PS, R]], Callable[PS, R]]:
    """A function whose every call is the stage ``stage``."""

    def decorate(fn: Callable[PS, R]) -> Callable[PS, R]:
        @functools.wraps(fn)
        def call(*args: PS.args, **kwargs: PS.kwargs) -> R:
            probe = _probe
            if probe is None:
                return fn(*args, **kwargs)
            began = probe.begin(stage)
            try:
                result = fn(*args, **kwargs)
            except BaseException:
                probe.end(stage, began, True)
                raise
            probe.end(stage, began, False)
            return result

        return call

    return decorate


@contextmanager
def timed_block(stage: Stage) -> Iterator[None]:
    """A block that is the stage ``stage`` (for a call that is not a function of ours)."""
    probe = _probe
    if probe is None:
        yield
        return
    began = probe.begin(stage)
    try:
        yield
    except BaseException:
        probe.end(stage, began, True)
        raise
    probe.end(stage, began, False)
