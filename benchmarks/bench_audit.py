"""What ``audit``'s ``fold-fields`` check costs per event.

On a fresh SQLite ledger from ``benchmarks.generate`` (``--runs`` ingestions, each attested
twice, plus the key events), measured on thread-CPU and wall time:

- **the check alone**: ``ledger.store.fold_fields.row_disagrees`` (the row remade from the
  stored event by the commit's function, compared byte for byte) over every stored event;
- **audit with every row vs with none**: ``audit_ledger`` with the rows present (each
  checked), then with the table emptied (a missing row is no finding, so nothing checked),
  taking turns, medians of ``--repeats``. The difference is the check's share of an audit;
  on a shared machine it is within the audit's own noise (signature checks dominate).

    python -m benchmarks.bench_audit --runs 300 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import delete, select

from benchmarks.generate import build_ledger
from ledger.application import Ledger
from ledger.audit import audit_ledger
from ledger.store.fold_fields import event_fold_fields, row_disagrees


def _audit(ledger: Ledger) -> tuple[float, float, int]:
    """(thread-CPU s, wall s, rows checked) of one audit, which must pass."""
    cpu, wall = time.thread_time(), time.perf_counter()
    report = audit_ledger(ledger)
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    assert report.verified, report.findings[:3]
    return cpu, wall, report.passed["fold-fields"]


def _set_rows(ledger: Ledger, rows: dict[int, bytes]) -> None:
    with ledger.store.transaction(commit=True) as session:
        session.execute(delete(event_fold_fields))
        if rows:
            session.execute(
                event_fold_fields.insert(),
                [{"position": p, "fields": f} for p, f in rows.items()],
            )


def measure(runs: int, repeats: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        built = build_ledger(Path(folder) / "home", runs=runs, attestations_per_run=2)
        ledger = built.ledger
        events = ledger.store.events.c
        with ledger.store.transaction(commit=False) as session:
            rows = {
                int(p): bytes(f)
                for p, f in session.execute(
                    select(event_fold_fields.c.position, event_fold_fields.c.fields)
                )
            }
            stored = session.execute(
                select(events.id, events.originator_id, events.originator_version)
                .add_columns(events.topic, events.state)
                .order_by(events.id)
            ).all()
        n = len(stored)
        assert len(rows) == n
        alone = []
        for _ in range(repeats):
            cpu = time.thread_time()
            for position, aggregate, version, topic, state in stored:
                row = rows[int(position)]
                made = row_disagrees(
                    ledger.mapper, aggregate, int(version), str(topic), bytes(state), row
                )
                assert made is None
            alone.append(time.thread_time() - cpu)
        on, off = [], []
        for _ in range(repeats):
            _set_rows(ledger, rows)
            on.append(_audit(ledger))
            _set_rows(ledger, {})
            off.append(_audit(ledger))
        assert all(checked == n for _, _, checked in on)
        assert all(checked == 0 for _, _, checked in off)
        ledger.close()

    def per_event(values: list[float]) -> float:
        return round(statistics.median(values) / n * 1e6, 1)

    return {
        "events": n,
        "checkAloneCpuUs": per_event(alone),
        "auditWithRowsCpuUs": per_event([c for c, _, _ in on]),
        "auditWithoutRowsCpuUs": per_event([c for c, _, _ in off]),
        "auditWithRowsWallUs": per_event([w for _, w, _ in on]),
        "auditWithoutRowsWallUs": per_event([w for _, w, _ in off]),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    before = os.getloadavg()[0]
    result = measure(args.runs, args.repeats)
    print({**result, "loadBefore": before, "loadAfter": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
