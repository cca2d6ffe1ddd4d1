"""Rerun results must be internally consistent before the ledger admits them: the views and
the ranking read these numbers, so a contradictory result is refused, not folded."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from domain.statements import MAX_RERUN_SAMPLES, RerunSummary


def summary(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "allCorrect": True,
        "medianNs": 1_700_000.0,
        "ci95Ns": [1_690_000.0, 1_710_000.0],
        "samples": 3,
        "samplesNs": [1_690_000.0, 1_700_000.0, 1_720_000.0],
    }
    return base | overrides


def test_consistent_summary_is_accepted() -> None:
    RerunSummary.model_validate(summary())
    RerunSummary.model_validate(summary(samplesNs=None, samples=80))


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"ci95Ns": [1_710_000.0, 1_690_000.0]}, "low <= high"),
        ({"medianNs": 1_000.0}, "median of samplesNs"),
        ({"medianNs": None}, "median of samplesNs"),
        ({"samples": 4}, "number of samplesNs"),
        (
            {"samplesNs": [1.0] * (MAX_RERUN_SAMPLES + 1), "samples": MAX_RERUN_SAMPLES + 1},
            "at most",
        ),
        ({"medianNs": -5.0}, "greater than or equal"),
    ],
)
def test_contradictory_summaries_are_refused(overrides: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        RerunSummary.model_validate(summary(**overrides))
