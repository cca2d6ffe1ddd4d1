"""How many stored events a read decodes: the measure of how much of a run's log it touched,
independent of the machine's speed (flooded-run tests: a read must not grow with notes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from ledger.aggregates import Run

T = TypeVar("T")


def decode_counter(
    mapper: Any, monkeypatch: pytest.MonkeyPatch
) -> Callable[[Callable[[], T]], tuple[int, T]]:
    """``measure(read)``: (the stored events ``mapper`` decoded while ``read()`` ran, and what
    it returned). The mapper is the ledger's own: every decode of a stored event passes it."""
    decoded = 0
    real = mapper.to_domain_event

    def counted(stored: Any) -> Any:
        nonlocal decoded
        decoded += 1
        return real(stored)

    monkeypatch.setattr(mapper, "to_domain_event", counted)

    def measure(read: Callable[[], T]) -> tuple[int, T]:
        nonlocal decoded
        decoded = 0
        result = read()
        return decoded, result

    return measure


# Every class of run event the ledger stores (a fold reads each of them).
RUN_CLASSES = [
    Run.Ingested,
    Run.Attested,
    Run.Retracted,
    Run.Superseded,
    Run.ManifestsAttached,
    Run.RerunRequested,
    Run.RerunClaimed,
    Run.RerunRecorded,
]
