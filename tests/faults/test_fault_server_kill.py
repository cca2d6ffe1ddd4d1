"""docs/design.md §12, "nothing acknowledged is lost": `kernelindex serve` is SIGKILLed while
several clients append signed attestations as fast as it answers, then restarted on the same store.

Every acknowledged append (201 with its receipt) must be stored at its position as the
envelope sent, with an inclusion proof that verifies against the log recomputed from the
stored events; the log must be dense (no event without a leaf, no half group); `kernelindex
audit` must be clean; the restarted server must take writes; the views after catch-up must
equal a fresh rebuild. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from fault_kit import (
    assert_store_whole,
    backend,
    serving,
    stored_events,
    views_and_rebuild,
    wait_for_events,
)

from benchmarks.http.acknowledged import verify_acknowledged
from benchmarks.http.load import LoadResult, Reply, run_load
from benchmarks.http.workload import plan_appends, prepare_ledger, split

CLIENTS = 8
APPENDS = 400  # per load: enough that the kill lands mid-load, few enough for a 2-core box
KILL_AFTER = 120  # new events stored before the kill


def _verified(home: Any, replies: list[Reply]) -> dict[str, Any]:
    ledger = home.open()
    try:
        return verify_acknowledged(ledger, replies)
    finally:
        ledger.close()


@pytest.mark.slow
def test_sigkill_under_append_load_loses_nothing_acknowledged(db_url: str, tmp_path: Path) -> None:
    prepared = prepare_ledger(tmp_path / "home", db_url, runs=4, attesters=CLIENTS)
    prepared.ledger.close()
    home, before = prepared.home, prepared.events
    plans = plan_appends(prepared.runs, prepared.attesters, split(APPENDS, CLIENTS), "kill")
    outcome: dict[str, LoadResult | BaseException] = {}

    with serving(home, tmp_path / "server.log") as server:

        def load() -> None:
            try:
                outcome["load"] = run_load(server, plans, 0, "raw")
            except BaseException as exc:  # reported by the assertion below
                outcome["load"] = exc

        clients = threading.Thread(target=load)
        clients.start()
        try:
            reached = wait_for_events(db_url, before + KILL_AFTER)
            server.kill()
        finally:
            server.kill()
            clients.join(timeout=180)
        log = server.tail()
    result = outcome.get("load")
    assert isinstance(result, LoadResult), f"the load failed: {result!r}\n{log}"
    first = result.replies
    acknowledged = sum(r.status == 201 for r in first)
    assert reached >= before + KILL_AFTER, f"only {reached - before} appends before the kill"
    assert 0 < acknowledged < APPENDS, "the kill did not land during the load"
    # Every reply is a 201 or no reply at all: a write is never half answered.
    assert {r.status for r in first} <= {201, 0}, {r.status for r in first}

    # Restart on the same store: it answers and takes writes at once.
    again = plan_appends(prepared.runs, prepared.attesters, split(80, CLIENTS), "after")
    with serving(home, tmp_path / "server-2.log") as server:
        second = run_load(server, again, 0, "raw")
        server.stop()
    assert all(r.status == 201 for r in second.replies), [
        (r.status, r.body[:200]) for r in second.replies if r.status != 201
    ][:5]

    report = _verified(home, first + second.replies)
    total = acknowledged + len(second.replies)
    assert report["acknowledged"] == total
    assert report["present"] == total and report["lost"] == 0 and report["mismatched"] == 0, report
    assert report["proofsVerified"] == report["rootsMatchRecomputedLog"] == total, report
    assert report["leafIndexMatches"] == total and report["duplicatePositions"] == 0, report
    assert report["storedLeafHashMismatches"] == 0 and report["dense"], report
    # Stored but never answered (the kill came between commit and reply) is allowed, and is
    # all there is beyond the acknowledged: every stored attestation is one that was sent.
    stored = stored_events(db_url) - before
    assert stored == total + report["unacknowledgedButStored"], (stored, report)

    shape = assert_store_whole(home)
    assert shape["events"] == before + stored
    incremental, rebuilt = views_and_rebuild(home)
    assert incremental == rebuilt
    print(
        f"\n[{backend(db_url)}] killed at {reached - before} stored: acknowledged "
        f"{acknowledged} before the kill + {len(second.replies)} after restart; present "
        f"{report['present']}, lost {report['lost']}, stored unanswered "
        f"{report['unacknowledgedButStored']}, failed without reply "
        f"{sum(r.status == 0 for r in first)}"
    )
