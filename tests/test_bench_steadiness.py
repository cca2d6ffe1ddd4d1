"""A figure is judged only on a steady machine (benchmarks/steadiness.py, issue 36).

A judged row whose anchor, measured again after the timed phase, drifted more than 10 % either
way keeps its verdict only where that drift could not have flipped it; otherwise it reads
"unsteady — not judged" in the suite's table, ``judged: false`` with its ``drift`` in the JSON,
and the count of targets met says how many were not judged; a drift that was not measured
leaves the row judged as before.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks import __main__ as suite_main
from benchmarks import bench_verify, steadiness
from benchmarks.suite import FigureResult, Row, at_most


def judged_row(passed: bool = True, to_target: float | None = None) -> Row:
    """A "ratio ≥ 0.3" row, by default just met (×1.05) or just missed (×0.95)."""
    if to_target is None:
        to_target = 1.05 if passed else 0.95
    ratio = 0.3 * to_target
    return Row("ingest", "a ratio", "1,000/s", "Ed25519", ratio, "ratio ≥ 0.3", passed, to_target)


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
    target = 1.05 if passed else 0.95
    assert row.to_target == target and row.ratio == 0.3 * target  # the value is still shown


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


@pytest.mark.parametrize(
    ("to_target", "drift", "passed", "judged"),
    [
        (0.36, 0.8, False, True),  # far short: short still with the anchor ×1.25 kinder
        (0.79, 0.8, False, True),
        (0.8, 0.8, False, False),  # 0.8 × 1.25 = 1: met with an anchor that much kinder
        (0.95, 0.8, False, False),
        (1.05, 0.8, True, False),
        (1.25, 0.8, True, True),  # 1.25 ÷ 1.25 = 1: still met with one that much harsher
        (3.0, 0.8, True, True),
        (0.36, 1.25, False, True),  # the drift's direction does not matter: ×1.25 either way
        (1.05, 1.25, True, False),
        (3.0, 1.25, True, True),
    ],
)
def test_an_unsteady_verdict_stands_where_the_drift_could_not_flip_it(
    to_target: float, drift: float, passed: bool, judged: bool
) -> None:
    row = steadiness.judge(judged_row(passed, to_target), {"ed25519ThreadCpu": drift})
    assert row.judged is judged
    assert row.passed is (passed if judged else None)
    assert row.note.startswith(steadiness.UNSTEADY) is not judged
    assert "outside 0.90-1.10" in row.note and f"×{drift:.3f}" in row.note
    if judged:
        assert "verdict holds within ×1.250" in row.note


@pytest.mark.parametrize(
    ("p99", "passed", "judged"),
    [(120.0, False, True), (55.0, False, False), (45.0, True, False), (20.0, True, True)],
)
def test_a_at_most_target_is_weighed_the_same_way(p99: float, passed: bool, judged: bool) -> None:
    """p99 ≤ 50 ms: ``to_target`` is target ÷ value there (≥ 1: met), so a p99 far above
    50 ms is a fail no drift of ×1.25 could have turned, one just under it a pass one could."""
    ok, to_target = at_most(p99, 50.0)
    assert ok is passed
    row = Row("http", "latency p99", f"{p99} ms", "", None, "≤ 50 ms", ok, to_target)
    row = steadiness.judge(row, {"echo": 0.8, "ed25519ThreadCpu": 1.02})
    assert row.judged is judged and row.passed is (passed if judged else None)


anchor_drift = st.one_of(
    st.none(),
    st.floats(min_value=0.5, max_value=2.0).map(lambda f: steadiness.drift(1000.0, 1000.0 * f)),
)


@given(
    st.floats(min_value=0.1, max_value=10.0),
    st.dictionaries(st.sampled_from(["echo", "cpu", "wall"]), anchor_drift, min_size=1),
)
def test_a_verdict_is_taken_away_exactly_when_the_drift_could_flip_it(
    to_target: float, drifts: dict[str, float | None]
) -> None:
    passed = to_target >= 1
    row = steadiness.judge(judged_row(passed, to_target), drifts)
    measured = [d for d in drifts.values() if d is not None]
    steady = all(0.9 <= d <= 1.1 for d in measured)
    # The anchor could have been any factor up to the largest drift kinder or harsher than
    # measured; the verdict could flip if any such factor gives the other one.
    w = max((max(d, 1 / d) for d in measured), default=1.0)
    # (Kinder: to_target × f; harsher: to_target ÷ f, so the extremes are exact.)
    factors = [w ** (k / 8) for k in range(9)]
    values = [to_target * f for f in factors] + [to_target / f for f in factors]
    could_flip = any((value >= 1) is not passed for value in values)
    assert row.judged is (steady or not could_flip)
    assert row.passed is (passed if row.judged else None)
    assert row.drift == drifts and row.to_target == to_target  # the value is still shown
    assert row.note.startswith(steadiness.UNSTEADY) is not row.judged
    for d in measured:  # what the note shows is what was judged: the drift to 3 decimals
        assert f"×{d:.3f}" in row.note and float(f"{d:.3f}") == d


@given(st.floats(min_value=0.1, max_value=10.0), anchor_drift, anchor_drift)
def test_a_wider_drift_never_gives_a_verdict_back(
    to_target: float, first: float | None, second: float | None
) -> None:
    """Adding an anchor (one more way the speed could have moved) never judges a row that
    was not judged without it."""
    passed = to_target >= 1
    alone = steadiness.judge(judged_row(passed, to_target), {"a": first})
    both = steadiness.judge(judged_row(passed, to_target), {"a": first, "b": second})
    assert not (both.judged and not alone.judged)


def test_the_verify_row_is_judged_on_its_all_cores_anchor() -> None:
    """``bench_verify.judged_row`` with stubbed anchors: a steady anchor judges the ratio, one
    that fell ×0.8 takes away a verdict near the target and keeps one far from it."""
    before = {"wall": 1000.0, "cpu": 500.0}
    steady = bench_verify.judged_row(480.0, 1000, 2, before, dict(before))
    assert steady.judged and steady.passed is False
    assert steady.drift == {"ed25519AllCoresCpu": 1.0, "ed25519AllCoresWall": 1.0}
    assert steady.ratio == 0.48 and steady.target == "ratio ≥ 0.5 (stretch 0.55)"
    assert bench_verify.judged_row(520.0, 1000, 2, before, dict(before)).passed is True
    fell = {"wall": 800.0, "cpu": 400.0}
    near = bench_verify.judged_row(520.0, 1000, 2, before, fell)
    assert not near.judged and near.passed is None
    assert near.drift == {"ed25519AllCoresCpu": 0.8, "ed25519AllCoresWall": 0.8}
    assert near.note.startswith(steadiness.UNSTEADY) and near.ratio == 0.52
    far = bench_verify.judged_row(200.0, 1000, 2, before, fell)
    assert far.judged and far.passed is False  # 0.2 ÷ 0.5 = 0.4: × 1.25 is 0.5, still short


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


def test_a_figures_progress_line_says_not_judged_rather_than_pass() -> None:
    ingest, http = figures()
    assert suite_main.figure_verdict(ingest) == "fail"  # a steady miss
    assert suite_main.figure_verdict(http) == "not judged (1 unsteady)"
    assert suite_main.figure_verdict(FigureResult("ingest", "x", ingest.rows[:1])) == "pass"
    both = FigureResult("x", "x", [*ingest.rows, *http.rows])
    assert suite_main.figure_verdict(both) == "fail, 1 not judged (unsteady)"
