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


def _case(status: str, reason: str = "") -> dict[str, Any]:
    return {"case": "c1", "status": status, "reason": reason}


def test_honest_sample_must_pass_everything() -> None:
    info = SAMPLES["rmsnorm_h4096_bf16"]
    assert selfcheck.judge(info, _result(_case("passed"), _case("passed")))[0]
    ok, why = selfcheck.judge(info, _result(_case("passed"), _case("incorrect", "round x")))
    assert not ok and "honest sample refused" in why


@pytest.mark.parametrize(
    ("name", "case", "expected"),
    [
        ("adv_unwritten_output", _case("incorrect", "round public-0: unwritten output: 8"), True),
        ("adv_unwritten_output", _case("incorrect", "round public-0: tolerance: x"), False),
        ("adv_mutates_input", _case("incorrect", "round secret: input mutation: the"), True),
        ("adv_cached_result", _case("incorrect", "round public-1: tolerance: only"), True),
        ("adv_cached_result", _case("error", "compile failed: nvcc"), False),
        ("adv_secret_round_wrong", _case("incorrect", "round secret: tolerance: only"), True),
        (
            "adv_secret_round_wrong",
            _case("incorrect", "round post-timing (fresh...): tolerance: o"),
            True,
        ),
        ("adv_secret_round_wrong", _case("incorrect", "round public-0: tolerance: only"), False),
        ("adv_sub_floor", _case("impossible_time", "impossible time: median"), True),
        ("adv_sub_floor", _case("incorrect", "round post-timing: unwritten output"), False),
        ("adv_sub_floor", _case("passed"), False),
    ],
)
def test_adversarial_sample_must_be_caught_by_its_check(
    name: str, case: dict[str, Any], expected: bool
) -> None:
    ok, why = selfcheck.judge(SAMPLES[name], _result(case))
    assert ok == expected, why


def test_one_case_caught_by_another_check_fails_the_sample() -> None:
    info = SAMPLES["adv_mutates_input"]
    ok, _ = selfcheck.judge(
        info,
        _result(
            _case("incorrect", "round public-0: input mutation: x"),
            _case("incorrect", "round public-0: unwritten output: x"),
        ),
    )
    assert not ok


def test_table_marks_ratios_beyond_the_tolerance() -> None:
    row = selfcheck.CaseRow("s", "c", "batch_size=1", "passed", 1100.0, (1000.0, 1200.0), 50)
    row.independent_ns = 1000.0
    report = selfcheck.SampleReport("s", True, "ok", [row])
    table = selfcheck.format_table([report], 0.03)
    assert "1.100!" in table and "1.10us" in table


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
    assert "caught by the floor check" in reports["adv_sub_floor"]["verdict"]
    assert reports["adv_secret_round_wrong"]["rows"][0]["note"].startswith("round secret")
    assert "7/7 samples as expected" in done.stdout
