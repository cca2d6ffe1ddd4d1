"""A SQLite store that is full or read-only: writes are refused with a clear, typed problem
(``store-full`` 507, ``read-only-store`` / ``store-unavailable`` 503) and a clear CLI error
with a nonzero exit, nothing of a refused write is stored, and reads (run page, history,
leaderboard) go on working.

How the faults are made, most genuine first:
- disk full: the store lives on a small tmpfs filled to the last byte, so SQLite meets a real
  ENOSPC (SQLITE_FULL) — needs the right to mount (root with CAP_SYS_ADMIN), else skipped;
  the quick smoke uses SQLite's own ``PRAGMA max_page_count`` on the server's connections,
  which raises the same SQLITE_FULL and needs no privilege;
- read-only: ``chattr +i`` on the database file and its WAL. We run as root, so ``chmod``
  would not stop a write; an immutable inode stops root too. The live server's open
  connections then fail their writes with an I/O error and any new connection opens the
  file read-only (SQLITE_READONLY). The -shm index stays writable: it is shared memory
  that readers need, not data (an immutable -shm crashes readers with SIGBUS).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_kit import assert_store_whole, cli, stored_events
from litestar import Litestar
from litestar.testing import TestClient
from sqlalchemy import event

from api.demo import build_demo
from api.server.app import create_app
from api.server.config import ServerConfig
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.signing.authoring import attestation_envelope
from ledger.signing.keys import SigningKey

CONFIG = ServerConfig(key_rate=0, address_rate=0, json_logs=False)


def _attestation(home: LedgerHome, ledger: Ledger, seed: str, note: str) -> dict[str, Any]:
    run = ledger.run(seed)
    assert run is not None
    attester = SigningKey.load(home.path / "keys" / "demo-attester.pem")
    # A long body: each refused write would need fresh pages.
    return attestation_envelope(seed, run.run_name, attester, type_="note", body=note * 40)


def _problem(reply: Any, codes: set[str], statuses: set[int]) -> dict[str, Any]:
    assert reply.status_code in statuses, (reply.status_code, reply.text[:500])
    assert reply.headers["content-type"].startswith("application/problem+json")
    problem: dict[str, Any] = reply.json()
    assert problem["code"] in codes, problem
    assert "nothing was stored" in problem["detail"], problem
    assert "Traceback" not in reply.text and "SQL" not in reply.text
    return problem


def _reads_work(client: TestClient[Litestar], seed: str) -> None:
    page = client.get(f"/v1/runs/{seed}")
    assert page.status_code == 200, page.text[:500]
    key = page.json()["comparisonKey"]
    history = client.get(f"/v1/runs/{seed}/history")
    assert history.status_code == 200 and history.json()["allVerified"], history.text[:500]
    board = client.get(f"/v1/leaderboards/{key}")
    assert board.status_code == 200 and board.json()["entries"], board.text[:500]


def _cli_attest(home: LedgerHome, seed: str, note: str) -> subprocess.CompletedProcess[str]:
    key = home.path / "keys" / "demo-attester.pem"
    return cli(
        "attest", seed, "--type", "note", "--body", note, "--key", str(key),
        "--home", str(home.path), "--db", home.db_url,
    )  # fmt: skip


# ------------------------------------------------------------------ disk full


@contextlib.contextmanager
def small_disk(size: str) -> Iterator[Path]:
    mount = Path(tempfile.mkdtemp(prefix="kernelindex-full-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        mount.rmdir()
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip()}); needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)  # lazy: nothing holds it up
        mount.rmdir()


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as out:  # unbuffered: each write meets ENOSPC itself
        for size in (1 << 16, 1 << 12, 1 << 9, 1):  # to the last byte
            with contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * size)
    assert shutil.disk_usage(folder).free < 4096, shutil.disk_usage(folder)
    return filler


@pytest.mark.slow
def test_a_full_disk_refuses_writes_and_reads_go_on(tmp_path: Path) -> None:
    with small_disk("16m") as disk:
        home = LedgerHome.at(tmp_path / "home", f"sqlite:///{disk / 'ledger.db'}")
        ledger, seed = build_demo(home)
        with TestClient(create_app(ledger, CONFIG)) as client:
            _reads_work(client, seed)
            before = stored_events(home.db_url)
            filler = _fill(disk)
            for n in range(3):  # the same answer each time: the writer thread lives on
                reply = client.post(
                    f"/v1/runs/{seed}/attestations",
                    json=_attestation(home, ledger, seed, f"full {n} "),
                )
                _problem(reply, {"store-full"}, {507})
            _reads_work(client, seed)
            done = _cli_attest(home, seed, "from the CLI while full")
            assert done.returncode != 0 and "error[store-full]" in done.stderr, done
            assert "Traceback" not in done.stderr, done.stderr
            assert stored_events(home.db_url) == before, "a refused write was stored"
            assert_store_whole(home)

            filler.unlink()  # space again: the same server takes writes
            reply = client.post(
                f"/v1/runs/{seed}/attestations", json=_attestation(home, ledger, seed, "room ")
            )
            assert reply.status_code == 201, reply.text[:500]
        ledger.close()
        assert stored_events(home.db_url) == before + 1
        assert_store_whole(home)


def test_smoke_page_limit_full_store_answers_507_and_keeps_reading(tmp_path: Path) -> None:
    """Quick and unprivileged: SQLite's page limit gives a genuine SQLITE_FULL."""
    home = LedgerHome.at(tmp_path / "home")
    ledger, seed = build_demo(home)
    engine = ledger.store.engine
    limit = {"pages": 0}

    @event.listens_for(engine, "connect")
    def cap(dbapi_connection: Any, record: Any) -> None:
        if limit["pages"]:
            dbapi_connection.execute(f"PRAGMA max_page_count = {limit['pages']}")

    with TestClient(create_app(ledger, CONFIG)) as client:
        _reads_work(client, seed)
        with engine.connect() as conn:
            limit["pages"] = int(conn.exec_driver_sql("PRAGMA page_count").scalar() or 0)
        engine.dispose()  # every connection from now on has the cap
        before = stored_events(home.db_url)
        replies = [
            client.post(
                f"/v1/runs/{seed}/attestations",
                json=_attestation(home, ledger, seed, f"capped {n} "),
            )
            for n in range(6)
        ]
        refused = [r for r in replies if r.status_code != 201]
        assert refused, "the page limit never filled the store"
        for reply in refused:
            _problem(reply, {"store-full"}, {507})
        _reads_work(client, seed)
        assert stored_events(home.db_url) == before + len(replies) - len(refused)
        limit["pages"] = 0
        engine.dispose()
        reply = client.post(
            f"/v1/runs/{seed}/attestations", json=_attestation(home, ledger, seed, "free ")
        )
        assert reply.status_code == 201, reply.text[:500]
    ledger.close()


# ------------------------------------------------------------------ read-only


@contextlib.contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    done = subprocess.run(
        ["chattr", "+i", *map(str, paths)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not available here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], check=False)


@pytest.mark.slow
def test_a_read_only_database_refuses_writes_and_reads_go_on(tmp_path: Path) -> None:
    home = LedgerHome.at(tmp_path / "home")
    ledger, seed = build_demo(home)
    db = home.path / "ledger.db"
    with TestClient(create_app(ledger, CONFIG)) as client:
        _reads_work(client, seed)
        before = stored_events(home.db_url)
        assert os.path.exists(f"{db}-wal")
        with immutable(db, Path(f"{db}-wal")):
            # The live server: its open connections cannot write the file any more.
            for n in range(2):
                reply = client.post(
                    f"/v1/runs/{seed}/attestations",
                    json=_attestation(home, ledger, seed, f"read-only {n} "),
                )
                _problem(reply, {"read-only-store", "store-unavailable"}, {503})
            _reads_work(client, seed)
            # A process opening the read-only file: SQLite says so, and so do we.
            done = _cli_attest(home, seed, "from the CLI, read-only")
            assert done.returncode != 0 and "error[read-only-store]" in done.stderr, done
            assert "Traceback" not in done.stderr, done.stderr
            assert stored_events(home.db_url) == before, "a refused write was stored"
            assert_store_whole(home)
        reply = client.post(
            f"/v1/runs/{seed}/attestations", json=_attestation(home, ledger, seed, "writable ")
        )
        assert reply.status_code == 201, reply.text[:500]
    ledger.close()
    assert_store_whole(home)
