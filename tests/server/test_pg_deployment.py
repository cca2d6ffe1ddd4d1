"""The PostgreSQL deployment of README "Deploying on PostgreSQL" and compose.yaml, rehearsed
without containers: `kernelindex serve --workers 2`, `kernelindex projector` and
`kernelindex sequencer` as separate processes on one database, signed appends from
concurrent clients landing on both workers. None lost, none duplicated, the log dense, every
proof valid against the log recomputed from the stored bytes, audit clean, the views equal a
fresh rebuild and the sequencer's checkpoint covers the whole tree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from ruamel.yaml import YAML

from benchmarks.http.acknowledged import verify_acknowledged
from benchmarks.http.cpu import process_cpu
from benchmarks.http.load import Reply
from benchmarks.http.server import ServerProcess
from benchmarks.http.workload import Planned, plan_appends, prepare_ledger, split
from ledger.application import Ledger
from ledger.store.transparency_log import checkpoints
from projections.runner import ProjectionRunner

REPO = Path(__file__).resolve().parents[2]
CLIENTS = 8
APPENDS = 200


@contextmanager
def _process(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "api.cli", *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _post_all(url: str, plan: list[Planned]) -> list[Reply]:
    replies: list[Reply] = []
    with httpx.Client(base_url=url, trust_env=False, timeout=60.0) as client:
        for planned in plan:
            started = time.perf_counter()
            try:
                reply = client.post(
                    planned.path,
                    content=planned.body,
                    headers={"content-type": "application/json"},
                )
                status, body = reply.status_code, reply.content
            except httpx.HTTPError as exc:
                status, body = 0, str(exc).encode()
            replies.append(Reply(planned, status, time.perf_counter() - started, body, True))
    return replies


@pytest.mark.postgres
def test_two_workers_projector_and_sequencer_on_one_database(db_url: str, tmp_path: Path) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("several server processes share one database only on PostgreSQL")
    prepared = prepare_ledger(tmp_path / "home", db_url, runs=4, attesters=CLIENTS)
    prepared.ledger.close()
    plans = plan_appends(prepared.runs, prepared.attesters, split(APPENDS, CLIENTS), "deploy")
    env = {
        **os.environ,
        "KERNELINDEX_HOME": str(prepared.home.path),
        "KERNELINDEX_DB": db_url,
        "KERNELINDEX_KEY_PASSPHRASE": "",
    }
    serve = ServerProcess(
        ["serve", "--workers", "2", "--log-format", "console"],
        tmp_path / "serve.log",
        workers=2,  # ready once both workers have started, not just the first
        command=[sys.executable, "-m", "api.cli"],
        env=env,
    )
    with (
        serve as server,
        _process(["projector", "--interval", "0.2"], env, tmp_path / "projector.log"),
        _process(
            ["sequencer", "--interval", "0.2", "--checkpoint-every", "0.5"],
            env,
            tmp_path / "sequencer.log",
        ),
    ):
        url = server.url
        workers = server.pids()[1:]
        cpu_before = process_cpu(workers)
        with ThreadPoolExecutor(CLIENTS) as pool:
            replies = [r for rs in pool.map(lambda p: _post_all(url, p), plans) for r in rs]
        cpu_used = {
            pid: seconds - cpu_before.get(pid, 0.0) for pid, seconds in process_cpu(workers).items()
        }
        # The same envelopes again, concurrently: each answered with its original receipt.
        replayed_plans = [plan[:3] for plan in plans]
        with ThreadPoolExecutor(CLIENTS) as pool:
            replayed = [
                r for rs in pool.map(lambda p: _post_all(url, p), replayed_plans) for r in rs
            ]
        time.sleep(1.5)  # one more sequencer tick signs the final tree

    assert sorted({r.status for r in replies}) == [201], [
        r.body[:200] for r in replies if r.status != 201
    ][:3]
    busy = sorted(cpu_used.values(), reverse=True)
    total = sum(busy)
    assert len(busy) >= 2 and busy[1] >= 0.1 * total, f"one worker took the load: {cpu_used}"
    first_receipt = {r.planned.digest: json.loads(r.body) for r in replies}
    for r in replayed:
        assert r.status == 200, r.body[:300]
        again = json.loads(r.body)
        assert again["duplicate"] is True
        assert again["position"] == first_receipt[r.planned.digest]["position"]

    ledger = prepared.home.open()
    try:
        report = verify_acknowledged(ledger, replies)
        assert report["acknowledged"] == APPENDS == report["present"]
        assert report["lost"] == report["mismatched"] == report["duplicatePositions"] == 0
        assert report["proofsVerified"] == report["rootsMatchRecomputedLog"] == APPENDS
        assert report["dense"] and report["events"] == prepared.events + APPENDS
        with ledger.store.transaction(commit=False) as session:
            signed = max(int(c.size) for c in session.execute(checkpoints.select()).all())
        assert signed == report["treeSize"]
        _assert_views_equal_rebuild(ledger)
    finally:
        ledger.close()
    audit = subprocess.run(
        [sys.executable, "-m", "api.cli", "audit"],
        cwd=REPO,
        env=env,
        check=False,
        capture_output=True,
        text=True,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr


def _assert_views_equal_rebuild(ledger: Ledger) -> None:
    """The projector's incremental views, then a rebuild in place: the same table digests."""
    runner = ProjectionRunner(ledger)
    runner.catch_up()  # anything the projector had not reached yet
    incremental = runner.table_digests()
    runner.rebuild()
    assert runner.table_digests() == incremental


def test_compose_file_runs_only_real_commands() -> None:
    """Every service command in compose.yaml is a `kernelindex` command this build has."""
    compose = YAML(typ="safe").load((REPO / "compose.yaml").read_text())
    commands: list[list[str]] = []
    for name, service in compose["services"].items():
        if name == "db":
            continue
        command = service["command"]
        if service.get("entrypoint") == ["sh", "-c"]:
            for part in command[0].replace("||", ";").split(";"):
                words = part.split()
                if words and words[0] == "kernelindex":
                    commands.append(words[1:])
        else:
            commands.append(list(command))
    assert {c[0] for c in commands} >= {"init", "db", "serve", "projector", "sequencer"}
    for args in commands:
        options = [a for a in args if a.startswith("--")]
        words = [a for a in args if not a.startswith("--")][: 2 if args[0] == "db" else 1]
        result = subprocess.run(
            [sys.executable, "-m", "api.cli", *words, "--help"],
            cwd=REPO,
            env={**os.environ, "COLUMNS": "200"},
            check=False,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, (args, result.stderr)
        for option in options:
            assert option in result.stdout, f"{args}: no option {option}"
