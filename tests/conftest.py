"""Shared fixtures: the vendored conformance data, and an event-store URL per backend.

Every ledger test runs on SQLite and on PostgreSQL. For PostgreSQL each test gets a database
of its own (unique name) that is dropped afterwards; the server is found at
$KERNELINDEX_TEST_PG (default 127.0.0.1:5432, user postgres), started with pg_ctl when none
answers, or the PostgreSQL variants are skipped with a message saying why.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from ledger.store.schema import upgrade
from projections.runner import prepare_views
from tests.paths import CONFORMANCE

REPO = Path(__file__).resolve().parents[1]

# No per-example deadline for any property: a deadline is a wall-clock bound, and on a shared,
# loaded machine one stall past 250 ms fails a correct test as "Unreliable test timings" (a
# FlakyFailure). Loaded here, before the test modules, so every settings() they build inherits
# it; the per-test deadline=None already written stays as it is.
settings.register_profile("kernelindex", deadline=None)
settings.load_profile("kernelindex")
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def shared() -> Path:
    """The vendored conformance data (conformance/README.md): fixtures, vectors, schemas."""
    return CONFORMANCE


@pytest.fixture(scope="session")
def seed_path(shared: Path) -> Path:
    return shared / "fixtures" / "seed" / "run-38823.manifest.json"


def _answers(url: str) -> str | None:
    """None if the server accepts a connection, else the reason it does not."""
    engine = create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        return None
    except Exception as exc:  # any failure to connect means "not usable here"
        return str(exc).splitlines()[0]
    finally:
        engine.dispose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_private_server() -> tuple[str | None, str]:
    """Start a throwaway PostgreSQL with pg_ctl; return (url, reason if it failed)."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")) or [
        shutil.which("pg_ctl") or ""
    ]
    pg_ctl = candidates[-1]
    if not pg_ctl or not os.path.exists(pg_ctl):
        return None, "pg_ctl is not installed"
    bindir = Path(pg_ctl).parent
    datadir = Path(tempfile.mkdtemp(prefix="kernelindex-pg-"))
    port = _free_port()
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        runuser = shutil.which("runuser")
        if runuser is None:
            return None, "running as root and runuser is unavailable for initdb"
        prefix = [runuser, "-u", "postgres", "--"]
        shutil.chown(datadir, "postgres")
    try:
        subprocess.run(
            [*prefix, str(bindir / "initdb"), "-D", str(datadir), "-U", "postgres", "--auth=trust"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(
            [
                *prefix,
                pg_ctl,
                "-D",
                str(datadir),
                "-o",
                f"-p {port} -k {datadir} -h 127.0.0.1",
                "-l",
                str(datadir / "log"),
                "-w",
                "start",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"could not start PostgreSQL with pg_ctl: {exc}"

    def stop() -> None:
        subprocess.run(
            [*prefix, pg_ctl, "-D", str(datadir), "-m", "immediate", "stop"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(datadir, ignore_errors=True)

    atexit.register(stop)
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", ""


@pytest.fixture(scope="session")
def pg_server() -> str:
    """URL of a PostgreSQL database we may create databases from, or skip."""
    url = os.environ.get("KERNELINDEX_TEST_PG", DEFAULT_PG)
    reason = _answers(url)
    if reason is None:
        return url
    started, why = _start_private_server()
    if started is not None and _answers(started) is None:
        return started
    pytest.skip(f"PostgreSQL tests skipped: no server at {url} ({reason}); {why}")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database on each backend, without the ledger's schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    server = request.getfixturevalue("pg_server")
    name = f"kernelindex_test_{uuid.uuid4().hex[:16]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def db_url(empty_db_url: str) -> str:
    """An empty event store on each backend, its schema created (`kernelindex db upgrade`)."""
    upgrade(empty_db_url)
    prepare_views(empty_db_url)
    return empty_db_url
