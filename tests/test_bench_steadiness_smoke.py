"""The suite's ingest and HTTP figures judge their timed rows only on a steady machine.

`python -m benchmarks --quick --only ingest http`: each judged row carries the drift of each
anchor it stands on (after ÷ before, measured in the run), keeps its verdict exactly where
benchmarks/steadiness.py's rule says it stands on those drifts, and the JSON's count of rows
not judged matches. The verify figure's row is checked the same way in
tests/test_bench_suite_smoke.py's verify run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks import steadiness

REPO = Path(__file__).resolve().parents[1]
# The anchors each timed row stands on: a wall ratio on its anchor's wall rate and on the
# host's speed (thread-CPU); the writer-bound ratio, a thread-CPU one, on thread-CPU alone.
EXPECTED = {
    ("ingest", "signed ingestion/s, append_many"): {"ed25519ThreadCpu", "ed25519Wall"},
    ("ingest", "writer-bound rate"): {"ed25519ThreadCpu"},
    ("http", "attestation appends/s over HTTP"): {"echo", "ed25519ThreadCpu"},
    ("http", "latency p99"): {"echo", "ed25519ThreadCpu"},
}


def test_ingest_and_http_rows_carry_their_drift(tmp_path: Path) -> None:
    out = tmp_path / "suite.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--quick",
            "--only",
            "ingest",
            "http",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard: a shared 2-core VM under load runs this slowly
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    rows = [row for figure in result["figures"].values() for row in figure["rows"]]
    found = {}
    for (figure, start), anchors in EXPECTED.items():
        (row,) = [r for r in rows if r["figure"] == figure and r["name"].strip().startswith(start)]
        assert set(row["drift"]) == anchors, row
        met = row["to_target"] >= 1  # the verdict before the drifts were weighed
        stands = steadiness.stands(met, row["to_target"], row["drift"])
        assert row["judged"] is stands, row
        assert row["passed"] is (met if stands else None), row
        assert row["target"] and row["to_target"] is not None  # the value against it, still
        found[start] = row
    # The proofs are a correctness target: never taken away by a drift.
    (proofs,) = [r for r in rows if r["name"].strip().startswith("inclusion proof in every")]
    assert proofs["judged"] and proofs["drift"] == {} and proofs["passed"] is True
    unjudged = sum(1 for r in rows if not r["judged"])
    assert result["targetsNotJudged"] == unjudged
    if unjudged:
        assert steadiness.UNSTEADY in done.stdout
        assert f"{unjudged} not judged (anchor drifted" in done.stdout
    ingest = result["figures"]["ingest"]["detail"]
    assert found["signed ingestion/s, append_many"]["drift"] == {
        "ed25519ThreadCpu": ingest["anchorDrift"],
        "ed25519Wall": ingest["anchorWallDrift"],
    }
    anchors = result["figures"]["http"]["detail"]["anchors"]
    assert (
        anchors["ed25519PerThreadCpuSecond"] > 0 and anchors["ed25519AfterPerThreadCpuSecond"] > 0
    )
    assert found["latency p99"]["drift"] == anchors["drift"]
