"""A server asks the log for its position only when something was committed since it last
asked (``api.service.freshness.CommitProbe``: SQLite's ``PRAGMA data_version``). Whatever the
road, a read never misses a commit made before it arrived, on another connection or in
another process, on SQLite and PostgreSQL (which asks the log every time)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from served_app import Served
from sqlalchemy import create_engine
from test_api_reads import SEED
from test_api_writes import SEED_NAME, register_attester

from api.demo import build_demo
from api.server.controllers.log import CHECKPOINT_SIZE
from api.service.freshness import CommitProbe, Views
from domain.statements import Role
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.store.connections import begin_snapshot
from ledger.store.event_store import connection_of

REGISTRY = "/v1/registry.jsonl"  # a costed read, cached per views position


def _registry_size(served: Served) -> int:
    reply = served.client.get(REGISTRY)
    assert reply.status_code == 200, reply.text[:300]
    return int(reply.headers[CHECKPOINT_SIZE])


def _replications(served: Served) -> int:
    reply = served.client.get(f"/v1/runs/{SEED}")
    assert reply.status_code == 200, reply.text[:300]
    return len(reply.json()["replications"])


def _reproduced(key: SigningKey, n: int) -> dict[str, Any]:
    return attestation_envelope(SEED, SEED_NAME, key, type_="reproduced", body=f"#{n}")


def _other_process_appends(home: LedgerHome, envelope: dict[str, Any]) -> None:
    """``envelope`` appended by a process of its own (its own connections, its own commit)."""
    script = (
        "import json, sys\n"
        "from pathlib import Path\nfrom ledger.home import LedgerHome\n"
        "ledger = LedgerHome.at(Path(sys.argv[1]), sys.argv[2]).open()\n"
        "ledger.append(json.loads(sys.stdin.read()))\n"
        "ledger.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(home.path), home.db_url],
        input=json.dumps(envelope),
        text=True,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_commit_elsewhere_is_seen_by_the_next_read(served: Served) -> None:
    """A sweep: a commit on another connection, then at once a cached read and a plain one,
    each a first read after the commit; then the same reads again (answered, on SQLite, with
    no query of the log). Then a commit by another process."""
    key = SigningKey.generate()
    register_attester(served, key)
    size, replications = _registry_size(served), _replications(served)
    other = served.home.open()  # its own engine: its own connections
    try:
        for n in range(6):
            other.append(_reproduced(key, n))
            # Each read compared, the first after the commit too; which one comes first
            # alternates (the cached read's own check, or the plain read's, sees it first).
            reads = [(_registry_size, size), (_replications, replications)]
            for read, before in (reads if n % 2 else reads[::-1]) * 2:
                assert read(served) == before + n + 1, (read.__name__, n)
    finally:
        other.close()
    _other_process_appends(served.home, _reproduced(key, 6))
    assert _registry_size(served) == size + 7
    assert _replications(served) == replications + 7
    # Nothing committed since: SQLite reads pay no query of the log, PostgreSQL's do.
    store: Any = served.ledger.store
    asked = Calls(store.last_position)
    store.last_position = asked
    for _ in range(3):
        assert _registry_size(served) == size + 7
        assert _replications(served) == replications + 7
    # (The first read may ask once: the folder's own commit of the last fold moved the
    # version.)
    assert asked.count <= 1 if not store.postgres else asked.count >= 6


class Calls:
    """Counts the calls of a real function, and makes them."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.count = 0

    def __call__(self) -> Any:
        self.count += 1
        return self.real()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ledger, Views, SigningKey]]:
    """The demo ledger on a SQLite file: a writer of its own, and a server's views over a
    read-only opening of it (as a served worker opens it)."""
    home = LedgerHome.at(tmp_path_factory.mktemp("probe") / "home")
    writer, _ = build_demo(home)
    key = SigningKey.generate()
    writer.append(key_registration_envelope(key.public, [Role.ATTESTER], key, label="probe"))
    reader = home.open(read_only=True)
    views = Views(reader, background=True)
    views.start()
    try:
        yield writer, views, key
    finally:
        views.stop()
        reader.close()
        writer.close()


_STEPS = st.lists(st.sampled_from(["commit", "position", "checkpoint"]), max_size=8)
_count = [0]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_STEPS)
def test_the_probe_answers_as_the_log_query_does(
    world: tuple[Ledger, Views, SigningKey], steps: list[str]
) -> None:
    """Old road == new road: after any mix of commits (another connection), WAL checkpoints
    (the WAL file reset under the probe) and reads, the probe's position is the log's, and
    the views' position as a server reads it is too."""
    writer, views, key = world
    probe = CommitProbe.of(views.ledger)
    assert probe is not None
    try:
        for step in steps:
            if step == "commit":
                _count[0] += 1
                writer.append(_reproduced(key, _count[0]))
            elif step == "checkpoint":
                engine = create_engine(views.ledger.store.engine.url)
                with engine.connect() as connection:
                    connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                engine.dispose()
            else:
                assert views.position() == views.ledger.store.last_position()
            assert probe.position() == views.ledger.store.last_position()
    finally:
        probe.close()


def test_a_caller_s_open_snapshot_never_becomes_the_probe_s(
    world: tuple[Ledger, Views, SigningKey],
) -> None:
    """The probe reads its version and position in one snapshot of its own connection: a
    caller that holds an older snapshot of the store (a transaction it opened) gets the log
    as it is, and leaves no stale position behind for the reads that follow."""
    writer, views, key = world
    probe = CommitProbe.of(views.ledger)
    assert probe is not None
    store = views.ledger.store
    try:
        with store.transaction(commit=False) as session:
            begin_snapshot(connection_of(session))
            before = store.last_position()  # the caller's snapshot is taken here
            _count[0] += 1
            writer.append(_reproduced(key, _count[0]))
            assert store.last_position() == before  # still the caller's snapshot
            assert probe.position() == writer.store.last_position() == before + 1
        # Nothing committed since: the probe answers from what it read, and that is exact.
        assert probe.position() == store.last_position() == before + 1
    finally:
        probe.close()


def test_stopped_views_close_their_probe(tmp_path: Path) -> None:
    home = LedgerHome.at(tmp_path / "home")
    ledger, _ = build_demo(home)
    views = Views(ledger, background=True)
    probe: Any = views._probe
    assert probe is not None and probe._held is not None
    views.stop()
    assert probe._held is None
    ledger.close()


def test_a_closed_probe_asks_the_log(tmp_path: Path) -> None:
    home = LedgerHome.at(tmp_path / "home")
    ledger, _ = build_demo(home)
    try:
        probe = CommitProbe.of(ledger)
        assert probe is not None
        assert probe.position() == ledger.store.last_position()
        probe.close()
        assert probe.position() == ledger.store.last_position()
    finally:
        ledger.close()


def test_a_locked_file_is_never_waited_for(tmp_path: Path) -> None:
    """On a rollback-journal database a writer's exclusive lock keeps readers out: the probe
    adds no wait of its own (its version unread, the log is asked as before)."""
    home = LedgerHome.at(tmp_path / "home")
    demo, _ = build_demo(home)
    demo.close()
    # A copy in rollback-journal mode (the copy's one connection may change it).
    path = str(tmp_path / "journal.db")
    source = sqlite3.connect(home.db_url.removeprefix("sqlite:///"))
    copy = sqlite3.connect(path, isolation_level=None)
    source.backup(copy)
    source.close()
    assert copy.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
    copy.close()
    home = LedgerHome.at(home.path, f"sqlite:///{path}")
    ledger = home.open(read_only=True)
    probe = CommitProbe.of(ledger)
    assert probe is not None
    locker = sqlite3.connect(path, isolation_level=None)
    try:
        position = probe.position()
        held: Any = probe._held
        assert held.execute("PRAGMA busy_timeout").fetchone() == (0,)
        locker.execute("BEGIN EXCLUSIVE")
        assert probe._read() is None  # not waited for
        locker.execute("ROLLBACK")
        assert probe.position() == position == ledger.store.last_position()
    finally:
        locker.close()
        probe.close()
        ledger.close()
