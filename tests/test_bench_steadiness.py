"""A figure is judged only on a steady machine (benchmarks/steadiness.py, issue 36).

A judged row whose anchor, measured again after the timed phase, drifted more than 10 % either
way reads "unsteady — not judged" in the suite's table, ``judged: false`` with its ``drift``
in the JSON, and the count of targets met says how many were not judged; a drift that was not
measured leaves the row judged as before.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks import __main__ as suite_main
from benchmarks import steadiness
from benchmarks.suite import FigureResult, Row


def judged_row(passed: bool = True) -> Row:
    return Row("ingest", "a ratio", "1,000/s", "Ed25519 3,000/s", 0.33, "ratio ≥ 0.3", passed, 1.1)


@pytest.mark.parametrize(
    ("drift", "judged"),
    [
        (0.89, False),
        (0.9, True),
        (0.91, True),
        (1.0, True),
        (1.09, True),
        (1.1, True),
        (1.11, False),
    ],
)
@pytest.mark.parametrize("passed", [True, False])
def test_the_ten_percent_bounds(drift: float, judged: bool, passed: bool) -> None:
    row = steadiness.judge(judged_row(passed), {"ed25519ThreadCpu": drift})
    assert row.judged is judged
    assert row.passed is (passed if judged else None)
    assert row.drift == {"ed25519ThreadCpu": drift}
    assert row.note.startswith(steadiness.UNSTEADY) is not judged
    assert f"×{drift:.3f}" in row.note
    assert row.to_target == 1.1 and row.ratio == 0.33  # the value is still shown


def test_a_missing_anchor_leaves_the_row_judged_as_before() -> None:
    row = steadiness.judge(judged_row(False), {"ed25519ThreadCpu": None})
    assert (row.passed, row.judged, row.drift) == (False, True, {"ed25519ThreadCpu": None})
    assert row.note == ""


def test_every_anchor_must_be_steady() -> None:
    row = steadiness.judge(judged_row(), {"echo": 1.02, "ed25519ThreadCpu": 0.85})
    assert not row.judged and row.passed is None
    assert "echo ×1.020" in row.note and "ed25519ThreadCpu ×0.850" in row.note
    row = steadiness.judge(judged_row(), {"echo": None, "ed25519ThreadCpu": 1.05})
    assert row.judged and row.passed is True


def test_an_informational_row_stays_informational() -> None:
    row = steadiness.judge(Row("http", "anchors", "1/s"), {"echo": 0.5})
    assert row.passed is None and row.judged  # nothing to take away: not counted unjudged


@pytest.mark.parametrize(
    ("before", "after", "found"),
    [
        (100.0, 90.0, 0.9),
        (3.0, 4.0, 1.333),
        (None, 1.0, None),
        (1.0, None, None),
        (0.0, 1.0, None),
        (1.0, 0.0, None),
        (math.nan, 1.0, None),
        (1.0, math.inf, None),
    ],
)
def test_drift_is_after_over_before_or_none(
    before: float | None, after: float | None, found: float | None
) -> None:
    assert steadiness.drift(before, after) == found


rates = st.floats(min_value=1.0, max_value=1e6, allow_nan=False)


@given(rates, st.floats(min_value=0.5, max_value=2.0), st.booleans())
def test_judged_exactly_when_the_shown_drift_is_within_ten_percent(
    before: float, factor: float, passed: bool
) -> None:
    drift = steadiness.drift(before, before * factor)
    assert drift is not None
    row = steadiness.judge(judged_row(passed), {"anchor": drift})
    within = 0.9 <= drift <= 1.1
    assert row.judged is within
    assert row.passed is (passed if within else None)
    # What the note shows is what was judged: the drift to 3 decimals.
    assert f"×{drift:.3f}" in row.note and float(f"{drift:.3f}") == drift


def figures() -> list[FigureResult]:
    steady = steadiness.judge(judged_row(True), {"ed25519ThreadCpu": 1.02})
    failed = steadiness.judge(
        Row("ingest", "writer-bound", "900/s", "", 0.3, "ratio ≥ 0.5", False, 0.6),
        {"ed25519ThreadCpu": 1.02},
    )
    moved = steadiness.judge(
        Row("http", "HTTP ratio", "900/s", "echo 2,000/s", 0.45, "ratio ≥ 0.5", False, 0.9),
        {"echo": 0.8, "ed25519ThreadCpu": 1.0},
    )
    proofs = Row("http", "proofs", "10/10", "", None, "every reply", True)
    return [
        FigureResult("ingest", "signed ingestion", [steady, failed]),
        FigureResult("http", "HTTP appends", [moved, proofs]),
    ]


def test_the_tally_counts_unjudged_rows_apart() -> None:
    found = figures()
    assert suite_main.tally(found) == (2, 3, 1)
    assert suite_main.tally_text(found) == (
        "2/3 targets met; 1 not judged (anchor drifted more than 10% within the run)"
    )
    assert found[1].passed  # an unsteady miss is not a fail
    assert suite_main.tally(found[:1]) == (1, 2, 0)
    assert suite_main.tally_text(found[:1]) == "1/2 targets met"


def test_the_suite_shows_an_unsteady_row_as_not_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(
        selected: list[str], quick: bool, large: bool, console: object
    ) -> tuple[list[FigureResult], float]:
        return figures(), 1.0

    monkeypatch.setattr(suite_main, "run", run)
    out = tmp_path / "suite.json"
    assert suite_main.main(["--quick", "--only", "ingest", "http", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    http_line = next(line for line in text.splitlines() if "HTTP ratio" in line)
    assert steadiness.UNSTEADY in http_line and "fail" not in http_line
    assert "2/3 targets met; 1 not judged" in text
    assert "missed writer-bound" in text and "missed HTTP ratio" not in text
    result = json.loads(out.read_text())
    assert (result["targetsMet"], result["targetsJudged"], result["targetsNotJudged"]) == (2, 3, 1)
    moved, proofs = result["figures"]["http"]["rows"]
    assert moved["judged"] is False and moved["passed"] is None
    assert moved["drift"] == {"echo": 0.8, "ed25519ThreadCpu": 1.0}
    assert proofs["judged"] is True and proofs["passed"] is True
    assert result["figures"]["http"]["passed"] is True
    steady = result["figures"]["ingest"]["rows"][0]
    assert steady["judged"] is True and steady["drift"] == {"ed25519ThreadCpu": 1.02}
