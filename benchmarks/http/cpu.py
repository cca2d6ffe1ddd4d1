"""CPU accounting: the server's, the clients', the PostgreSQL backends' and the whole machine's,
over a measured window.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, text

# ------------------------------------------------------------------------- CPU accounting

_TICK = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [p for p, parent in parents.items() if parent == current]
        found.extend(children)
        frontier.extend(children)
    return found


def process_cpu(pids: list[int]) -> dict[int, float]:
    """utime + stime in seconds of each live process (by pid: workers may come and go)."""
    cpu: dict[int, float] = {}
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            cpu[pid] = (int(fields[11]) + int(fields[12])) / _TICK
    return cpu


def _machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # user..steal (guest time is already inside user)
    return total - idle, total


@dataclass
class CpuWindow:
    """CPU used between start() and stop(): the server's processes, this (client) process,
    the database's backend processes serving the ledger (PostgreSQL), and the machine's
    share busy across all cores (what is left is everyone else: on a shared machine, other
    work competes for the same cores, and this says how much)."""

    server_pids: list[int]
    database_pids: Callable[[], list[int]] | None = None
    server_s: float = 0.0
    client_s: float = 0.0
    database_s: float = 0.0
    machine_busy: float = 0.0
    _server0: dict[int, float] = field(default_factory=dict)
    _database0: dict[int, float] = field(default_factory=dict)
    _client0: float = 0.0
    _jiffies0: tuple[int, int] = (0, 0)

    def start(self) -> None:
        # After the warm-up: every pooled database connection (backend) exists by now.
        if self.database_pids is not None:
            self._database0 = process_cpu(self.database_pids())
        self._server0 = process_cpu(self.server_pids)
        self._client0 = time.process_time()
        self._jiffies0 = _machine_jiffies()

    def stop(self) -> None:
        now = process_cpu(self.server_pids)
        self.server_s = sum(now[p] - self._server0.get(p, 0.0) for p in now)
        self.client_s = time.process_time() - self._client0
        database = process_cpu(list(self._database0))
        self.database_s = sum(database[p] - self._database0[p] for p in database)
        busy, total = _machine_jiffies()
        span = total - self._jiffies0[1]
        self.machine_busy = (busy - self._jiffies0[0]) / span if span else 0.0


def pg_backends(db_url: str) -> Callable[[], list[int]]:
    """The pids of the PostgreSQL backends connected to this database (same machine)."""

    def pids() -> list[int]:
        engine = create_engine(db_url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT pid FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                )
                return [int(r[0]) for r in rows]
        finally:
            engine.dispose()

    return pids
