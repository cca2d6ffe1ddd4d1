"""gpu_agent/selfcheck.py: its verdicts, and a CPU run of every sample through the harness.

On the cpu-test backend the samples run as their emulations (gpu_agent/samples/emulations.py)
through the production harness, so this checks, in CI, that each cheat is refused by the
check its sample names and that the honest samples pass — the same logic selfcheck.sh runs
on a GPU with the real kernels.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_agent import selfcheck
from gpu_agent.samples import SAMPLES

REPO = Path(__file__).resolve().parents[2]


def _result(*cases: dict[str, Any]) -> dict[str, Any]:
    return {"cases": list(cases)}


def _case(status: str, reason: str = "", round_: str | None = None) -> dict[str, Any]:
    case = {"case": "c1", "status": status, "reason": reason}
    return case if round_ is None else {**case, "round": round_}


def test_honest_sample_must_pass_everything() -> None:
    info = SAMPLES["rmsnorm_h4096_bf16"]
    assert selfcheck.judge(info, _result(_case("passed"), _case("passed")))[0]
    ok, why = selfcheck.judge(info, _result(_case("passed"), _case("incorrect", "output-mismatch")))
    assert not ok and "honest sample refused" in why


@pytest.mark.parametrize(
    ("name", "case", "expected"),
    [
        ("adv_unwritten_output", _case("incorrect", "unwritten-output", "public-0"), True),
        ("adv_unwritten_output", _case("incorrect", "output-mismatch", "public-0"), False),
        ("adv_mutates_input", _case("incorrect", "input-mutation", "secret"), True),
        ("adv_cached_result", _case("incorrect", "output-mismatch", "public-1"), True),
        ("adv_cached_result", _case("error", "build-failed"), False),
        ("adv_secret_round_wrong", _case("incorrect", "output-mismatch", "secret"), True),
        ("adv_secret_round_wrong", _case("incorrect", "output-mismatch", "post-timing"), True),
        ("adv_secret_round_wrong", _case("incorrect", "output-mismatch", "public-0"), False),
    ],
)
def test_adversarial_sample_must_be_caught_by_its_check(
    name: str, case: dict[str, Any], expected: bool
) -> None:
    ok, why = selfcheck.judge(SAMPLES[name], _result(case))
    assert ok == expected, why


@pytest.mark.parametrize(
    "case",
    [
        _case("impossible_time", "below-roofline-floor"),
        _case("incorrect", "unwritten-output", "last-timed"),
    ],
)
def test_the_refill_sample_refused_by_a_check_was_not_neutralised(case: dict[str, Any]) -> None:
    # With every timed launch refilled it computes when timed; a refusal means the refill
    # did not reach it, which the self-check must report rather than count as a catch.
    ok, why = selfcheck.judge(SAMPLES["adv_sub_floor"], _result(_case("passed"), case))
    assert not ok and why.startswith("not neutralised by the refill")


def test_the_refill_sample_that_passes_still_has_to_be_shown_timed_working() -> None:
    ok, why = selfcheck.judge(SAMPLES["adv_sub_floor"], _result(_case("passed")))
    assert not ok and why == selfcheck.NEUTRALISE_PENDING  # check_neutralised decides


def test_one_case_caught_by_another_check_fails_the_sample() -> None:
    info = SAMPLES["adv_mutates_input"]
    ok, _ = selfcheck.judge(
        info,
        _result(
            _case("incorrect", "input-mutation", "public-0"),
            _case("incorrect", "unwritten-output", "public-0"),
        ),
    )
    assert not ok


def test_table_marks_timings_that_do_not_agree() -> None:
    # 1.1 µs against 1.0 µs is 10 % but 0.1 µs: within the events' fixed cost (2 µs slack).
    small = selfcheck.CaseRow("s", "c", "batch_size=1", "passed", 1100.0, (1000.0, 1200.0), 50)
    small.independent_ns = 1000.0
    # 110 µs against 100 µs is 10 µs: beyond max(3 %, 2 µs).
    large = selfcheck.CaseRow("s", "d", "batch_size=9", "passed", 110_000.0, None, 50)
    large.independent_ns = 100_000.0
    report = selfcheck.SampleReport("s", True, "ok", [small, large])
    table = selfcheck.format_table([report], 0.03)
    lines = table.splitlines()
    assert "1.10us" in lines[2] and "1.100 " in lines[2] and "1.100!" not in lines[2]
    assert "1.100!" in lines[3]


def test_timing_slack_is_relative_with_an_absolute_floor() -> None:
    from gpu_agent.backends.timing_slack import absolute_slack_ns, agree, allowed_gap_ns

    assert allowed_gap_ns(100_000.0, 0.03) == pytest.approx(3_000.0)  # 3 % dominates
    assert allowed_gap_ns(2_500.0, 0.03) == 2_000.0  # a µs kernel: the events' fixed cost
    assert agree(4_400.0, 2_500.0, 0.03) and not agree(4_600.0, 2_500.0, 0.03)
    assert absolute_slack_ns(1_200.0) == 1_700.0  # measured overhead + one resolution step
    assert absolute_slack_ns(100.0) == 1_000.0  # never under two resolution steps
    assert agree(2_300.0, 2_000.0, 0.03, event_overhead_ns=1_000.0)
    assert not agree(3_600.0, 2_000.0, 0.03, event_overhead_ns=1_000.0)


def _floor_report(*ratios: float) -> selfcheck.SampleReport:
    rows = []
    for index, ratio in enumerate(ratios):
        row = selfcheck.CaseRow("adv_sub_floor", f"c{index}", "b", "passed", 30_000.0 * ratio)
        row.independent_ns = 30_000.0
        rows.append(row)
    return selfcheck.SampleReport("adv_sub_floor", False, "NOT CAUGHT: every case passed", rows)


def test_a_floor_cheat_timed_working_is_neutralised() -> None:
    report = _floor_report(8.0, 11.5)  # the harness timed it computing; unrefilled, it idles
    selfcheck.check_neutralised(report)
    assert report.ok and report.verdict.startswith("neutralised")
    idle = _floor_report(8.0, 1.02)  # one case timed idle by the harness too
    selfcheck.check_neutralised(idle)
    assert not idle.ok and "nor neutralised" in idle.verdict


def test_rows_are_written_as_each_sample_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OUT", str(tmp_path))
    output = selfcheck.ReportOutput(None, None)
    assert output.table == tmp_path / "selfcheck-table.txt"
    row = selfcheck.CaseRow("s", "c", "batch_size=1", "passed", 2000.0, None, 50)
    reports = [selfcheck.SampleReport("s", True, "all cases passed", [row])]
    output.sample_done(reports, 0.03)
    text = output.table.read_text("utf-8")
    assert "batch_size=1" in text and "PASS  s: all cases passed" in text
    assert json.loads((tmp_path / "selfcheck.json").read_text("utf-8"))[0]["sample"] == "s"
    reports.append(selfcheck.SampleReport("t", False, "skipped: deadline 1s"))
    output.sample_done(reports, 0.03)
    assert "FAIL  t: skipped: deadline 1s" in output.table.read_text("utf-8")
    assert len(json.loads((tmp_path / "selfcheck.json").read_text("utf-8"))) == 2


def test_each_row_is_written_when_its_case_is_measured(tmp_path: Path) -> None:
    output = selfcheck.IncrementalOutput(tmp_path / "t.txt", tmp_path / "r.json", 0.03)
    first = selfcheck.CaseRow("s", "c1", "batch_size=1", "passed", 2000.0, None, 50)
    output.case_done(first)
    assert "batch_size=1" in output.table.read_text("utf-8")  # before the sample is done
    timed = selfcheck.CaseRow("s", "c2", "batch_size=2", "passed", 3000.0, None, 50)
    output.case_done(timed)
    timed.independent_ns = 3000.0
    output.sample_done([selfcheck.SampleReport("s", True, "ok", [first, timed])], 0.03)
    lines = output.table.read_text("utf-8").splitlines()[2:]
    # The verdict at the end; the row timed independently again, with its ratio.
    names = ["batch_size=1", "batch_size=2", "batch_size=2", "s:"]
    assert [line.split()[1] for line in lines] == names
    assert "1.000" in lines[2] and lines[3] == "PASS  s: ok"


def test_every_sample_on_cpu_is_treated_as_it_must_be(tmp_path: Path) -> None:
    """All samples, one case each, clamped to 128 rows, on the cpu-test backend."""
    out = tmp_path / "reports.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_agent.selfcheck",
            "--backend",
            "cpu-test",
            "--quick",
            "--cases",
            "1",
            "--max-axis",
            "128",
            "--json",
            str(out),
            "--table",
            str(tmp_path / "table.txt"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    reports = {r["sample"]: r for r in json.loads(out.read_text("utf-8"))}
    assert set(reports) == set(SAMPLES)
    assert all(r["ok"] for r in reports.values())
    # Neutralised: timed (refilled) it computes, at least 1.5× its unrefilled, idle timing.
    floor = reports["adv_sub_floor"]
    assert floor["verdict"].startswith("neutralised: refilled timed launches made it compute")
    assert all(
        row["ratio"] >= 1.5 and row["method"] == "cpu-test, no refill" for row in floor["rows"]
    )
    assert reports["adv_secret_round_wrong"]["rows"][0]["note"].startswith("round secret")
    assert "7/7 samples as expected" in done.stdout
    table = (tmp_path / "table.txt").read_text("utf-8")
    assert all(f"PASS  {name}:" in table for name in SAMPLES)
