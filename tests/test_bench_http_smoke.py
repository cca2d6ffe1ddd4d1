"""The HTTP load benchmark runs end to end at a tiny size and reports what it should.

Real server process, real appends over loopback, SQLite: 2 clients x 5 appends (+1 warm-up
each). Checks the shape of the results and that every acknowledged append was found: with
the writer thread in the HTTP process (where the server times every stage of a write), and
with the ledger's writer process, as `kernelindex serve` runs (the HTTP side's stages).
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import bench_http
from benchmarks.http import spans as stage_names

TINY = ["--clients", "2", "--appends", "10", "--in-process", "5", "--no-echo"]


def test_bench_http_tiny_sqlite_run(tmp_path: Path) -> None:
    out = tmp_path / "http.json"
    result = bench_http.main([*TINY, "--writer", "thread", "--out", str(out)])
    assert json.loads(out.read_text()) == result
    assert result["config"]["clients"] == 2
    assert result["echo"] is None  # the echo anchor is skipped to keep this quick
    (scenario,) = result["scenarios"]
    assert (scenario["backend"], scenario["workers"]) == ("sqlite", 1)
    http = scenario["http"]
    assert http["requests"] == 10 and http["warmupRequests"] == 2
    assert http["statuses"] == {"201": 12}
    assert http["perSecond"] > 0
    assert set(http["latencyMs"]) == {"mean", "p50", "p90", "p99", "max"}
    verification = scenario["verification"]
    assert verification["acknowledged"] == verification["present"] == 12
    assert verification["proofsVerified"] == verification["rootsMatchRecomputedLog"] == 12
    assert verification["lost"] == verification["mismatched"] == 0
    assert verification["dense"] is True
    assert verification["treeSize"] == verification["events"]
    assert scenario["inProcess"]["appends"] > 0
    # The server counted exactly the timed requests, in every stage.
    spans = scenario["serverTimings"]["spans"]
    assert spans[stage_names.S_SERVICE]["calls"] == 10
    assert spans[stage_names.S_WAIT]["calls"] == 10
    assert 1 <= spans[stage_names.S_DB_COMMIT]["calls"] <= 10  # groups of one or more appends
    # Every stage the ledger names (ledger.timing) was timed through its hooks, but one: the
    # envelope is parsed once, at the edge, and the ledger admits the parsed envelope.
    parse = stage_names.S_PARSE
    assert parse not in spans
    assert all(
        spans[label]["calls"] >= 1 for label in stage_names.LEDGER_STAGES.values() if label != parse
    )
    stages = [row["stage"] for row in scenario["breakdownMs"]]
    assert stage_names.S_WAIT in stages and stage_names.S_DB_COMMIT in stages
    judged = scenario["judged"]
    assert judged["pass"]["inclusionProofInEveryReply"] and judged["pass"]["noneLostLogDense"]
    assert judged["ratios"]["httpToEcho"] is None and judged["ratios"]["httpToInProcess"] > 0


def test_bench_http_tiny_run_through_the_writer_process(tmp_path: Path) -> None:
    result = bench_http.main([*TINY, "--out", str(tmp_path / "http.json")])
    (scenario,) = result["scenarios"]
    assert scenario["http"]["statuses"] == {"201": 12}
    verification = scenario["verification"]
    assert verification["acknowledged"] == verification["present"] == 12
    assert verification["proofsVerified"] == 12 and verification["dense"] is True
    # The HTTP process timed its side: the edge checks and the wait for the writer process.
    spans = scenario["serverTimings"]["spans"]
    assert spans[stage_names.S_SERVICE]["calls"] == spans[stage_names.S_WAIT]["calls"] == 10
