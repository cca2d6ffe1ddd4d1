"""The ledger's writer process (``ledger.writer_process``): what ``kernelindex serve`` hands
every write to on SQLite. A worker gets from it exactly what the in-process writer gives
(receipts with their inclusion proofs, duplicates, refusals with their codes), many workers'
concurrent writes all land once each, and the writer ends with its server, even a server
killed outright."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Client, Connection, Pipe
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any, cast

import httpx
import msgspec
import pytest
from litestar import Litestar
from litestar.testing import TestClient
from live_server import free_port, wait_for_health
from served_app import TEST_CONFIG

from api.server.app import create_app
from domain.statements import Role
from ledger import writer_process
from ledger.checked_wire import TAG
from ledger.group_commit import WriterClosedError
from ledger.home import LedgerHome
from ledger.proofs.merkle import verify_inclusion
from ledger.receipt import Receipt
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.dsse import UnknownKeyError, parse_envelope
from ledger.signing.keys import SigningKey
from ledger.writer_process import (
    ACCEPT_BACKOFF,
    HANDSHAKE_TIMEOUT,
    MESSAGE_TIMEOUT,
    RemoteWriter,
    WriterProcess,
    _Listener,
    _Serving,
    dial,
    shut_down,
)
from tests.paths import REPO

SEED_NAME = "sol-submission-38823"
CLI = [sys.executable, "-m", "api.cli"]
SERVE_OPTIONS = ["--workers", "2", "--log-format", "console"]


def _note(seed: str, key: SigningKey, body: str) -> dict[str, object]:
    return attestation_envelope(seed, SEED_NAME, key, type_="note", body=body)


def test_a_worker_gets_what_the_writer_thread_gives(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    process, home, seed = writer
    remote = RemoteWriter(process.address, process.key)
    try:
        alice = SigningKey.generate()
        remote.append(key_registration_envelope(alice.public, [Role.ATTESTER], alice))
        envelope = _note(seed, alice, "through the writer process")
        receipt = remote.append(parse_envelope(envelope))  # an envelope the edge parsed
        assert isinstance(receipt, Receipt) and not receipt.duplicate
        assert receipt.event == "Run.Attested" and receipt.signer == alice.key_id
        proof = receipt.inclusion
        assert proof is not None
        ledger = home.open(read_only=True)
        try:
            (record,) = ledger.stored_records(receipt.aggregate_id, receipt.version)
            assert record.position == receipt.position
            with ledger.store.transaction(commit=False) as session:
                leaf = ledger.tlog.leaf_for_position(session, receipt.position)
                (leaf_hash,) = [
                    bytes(row[2]) for row in ledger.tlog.entries(session, leaf, leaf + 1)
                ]
            verify_inclusion(leaf_hash, proof.leaf_index, proof.tree_size, proof.hashes, proof.root)
        finally:
            ledger.close()
        again = remote.append(envelope)  # the same envelope: its original receipt
        assert again.duplicate and again.position == receipt.position
        stranger = SigningKey.generate()  # never registered: refused, with the ledger's reason
        with pytest.raises(UnknownKeyError) as refused:
            remote.append(_note(seed, stranger, "who is this"))
        assert refused.value.code == UnknownKeyError.code
    finally:
        remote.close()


def test_concurrent_writes_from_many_workers_each_land_once(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    process, home, seed = writer
    keys = [SigningKey.generate() for _ in range(4)]
    remotes = [RemoteWriter(process.address, process.key) for _ in keys]
    try:
        for remote, key in zip(remotes, keys, strict=True):
            remote.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
        jobs = [
            (r, _note(seed, k, f"{n}"))
            for n in range(20)
            for r, k in zip(remotes, keys, strict=True)
        ]
        with ThreadPoolExecutor(16) as pool:
            receipts = list(pool.map(lambda job: job[0].append(job[1]), jobs))
    finally:
        for remote in remotes:
            remote.close()
    positions = [r.position for r in receipts]
    assert len(set(positions)) == len(jobs) and not any(r.duplicate for r in receipts)
    # Answers come back a group at a time: each caller still gets its own envelope's receipt.
    assert [r.envelope_digest for r in receipts] == [parse_envelope(e).digest for _, e in jobs]
    ledger = home.open(read_only=True)
    try:
        assert ledger.event_count(receipts[0].aggregate_id) >= len(jobs) + 1
        with ledger.store.transaction(commit=False) as session:
            assert ledger.tlog.tree_size(session) == ledger.store.last_position()  # dense
    finally:
        ledger.close()


def _registered(process: WriterProcess) -> tuple[RemoteWriter, SigningKey]:
    """A worker's handle on the writer, and an attester key registered through it."""
    remote = RemoteWriter(process.address, process.key)
    alice = SigningKey.generate()
    remote.append(key_registration_envelope(alice.public, [Role.ATTESTER], alice))
    return remote, alice


def _raw(process: WriterProcess) -> Connection:
    """A connection to the writer that sends what the test makes it send."""
    return Client(process.address, family="AF_UNIX", authkey=process.key)


def _stall_midway(connection: Connection) -> None:
    """Begin a request and never finish it: multiprocessing's framing is a 4-byte length,
    then the pickle; only its start goes."""
    with socket.socket(fileno=os.dup(connection.fileno())) as shared:
        shared.sendall(struct.pack("!i", 100_000) + b"\x80\x05")


def _assert_cut_off(connection: Connection) -> None:
    """The writer closed this connection: EOF, not (another) answer. (A reset where bytes
    the peer sent were still unread when the writer closed its end, as the kernel says it
    then: a trickling peer's last byte can arrive after the writer stopped reading.)"""
    assert connection.poll(30)
    with pytest.raises((EOFError, ConnectionResetError)):
        connection.recv()


def test_a_worker_that_sends_garbage_is_dropped_and_the_others_are_served(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """One serving thread waits on every worker: a connection that sends what is not a
    request (or breaks off) is closed, and the writer goes on serving the rest."""
    process, _, seed = writer
    good, alice = _registered(process)
    bad = _raw(process)
    try:
        bad.send("not a numbered request")
        _assert_cut_off(bad)
        receipt = good.append(_note(seed, alice, "still served"))
        assert isinstance(receipt, Receipt) and not receipt.duplicate
    finally:
        bad.close()
        good.close()


def test_a_worker_whose_msgpack_request_does_not_decode_is_dropped_and_others_served(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """A body marked as a checked envelope (``checked_wire.TAG``) that is not one (a wrong
    shape, or an envelope that does not parse) cuts its worker off like any garbage."""
    process, _, seed = writer
    good, alice = _registered(process)
    for body in (
        TAG + msgspec.msgpack.encode([1, "not", "a", "request"]),
        TAG + msgspec.msgpack.encode([1, {"payload": "?"}, {}, None, None, False]),
    ):
        bad = _raw(process)
        try:
            bad.send_bytes(body)
            _assert_cut_off(bad)
        finally:
            bad.close()
    receipt = good.append(_note(seed, alice, "still served"))
    assert isinstance(receipt, Receipt) and not receipt.duplicate
    good.close()


def test_what_a_worker_sent_before_garbage_is_answered_before_it_is_cut_off(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    process, _, seed = writer
    remote, alice = _registered(process)
    remote.close()
    client = _raw(process)
    try:
        client.send((7, _note(seed, alice, "sent just before the garbage")))
        client.send("not a numbered request")
        assert client.poll(10)
        ((number, ok, receipt),) = client.recv()
        assert (number, ok) == (7, True) and isinstance(receipt, Receipt)
        _assert_cut_off(client)
    finally:
        client.close()


def test_a_worker_stalled_midway_through_a_message_is_cut_off_not_waited_for(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """A worker stopped halfway through sending a request holds up nobody (the writer reads
    what has arrived, never waits for the rest), and after ``MESSAGE_TIMEOUT`` it is cut
    off."""
    process, _, seed = writer
    good, alice = _registered(process)
    stalled = _raw(process)
    try:
        _stall_midway(stalled)
        started = time.monotonic()
        receipt = good.submit(_note(seed, alice, "not held up")).result(timeout=60)
        assert isinstance(receipt, Receipt)
        assert time.monotonic() - started < MESSAGE_TIMEOUT / 2
        _assert_cut_off(stalled)
        assert time.monotonic() - started < MESSAGE_TIMEOUT + 10
    finally:
        stalled.close()
        good.close()


def test_a_worker_that_trickles_a_message_is_cut_off_and_holds_up_nobody(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """A byte at a time, each sooner than a read's own time limit: the message as a whole
    is late, so its worker is cut off all the same (an attack review had one such peer hold
    every group for as long as it kept trickling); honest workers are answered meanwhile."""
    process, _, seed = writer
    good, alice = _registered(process)
    trickling = _raw(process)
    stop = threading.Event()

    def trickle() -> None:
        with socket.socket(fileno=os.dup(trickling.fileno())) as shared:
            shared.sendall(struct.pack("!i", 1000))
            while not stop.wait(0.2):
                try:
                    shared.sendall(b"\x00")
                except OSError:  # cut off
                    return

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    try:
        started = time.monotonic()
        for n in range(3):
            receipt = good.submit(_note(seed, alice, f"answered {n}")).result(timeout=60)
            assert isinstance(receipt, Receipt)
        assert time.monotonic() - started < MESSAGE_TIMEOUT / 2
        _assert_cut_off(trickling)
        assert time.monotonic() - started < MESSAGE_TIMEOUT + 10
        after = good.submit(_note(seed, alice, "and after")).result(timeout=60)
        assert isinstance(after, Receipt)
    finally:
        stop.set()
        sender.join(5)
        trickling.close()
        good.close()


def test_many_requests_in_one_read_are_each_answered(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """Requests that arrive in one read (more than a group's share of them, split across
    reads mid-message) are cut into whole messages and each answered once."""
    process, _, seed = writer
    remote, alice = _registered(process)
    remote.close()
    client = _raw(process)
    try:
        frames = b"".join(
            struct.pack("!i", len(body)) + body
            for body in (
                ForkingPickler.dumps((n, _note(seed, alice, f"one of many {n}")))
                for n in range(300)
            )
        )
        with socket.socket(fileno=os.dup(client.fileno())) as shared:
            cut = len(frames) // 3 + 7  # mid-message
            shared.sendall(frames[:cut])
            time.sleep(0.2)
            shared.sendall(frames[cut:])
        answered: dict[int, bool] = {}
        while len(answered) < 300:
            assert client.poll(60)
            for number, ok, _ in client.recv():
                assert number not in answered
                answered[number] = ok
        assert answered == dict.fromkeys(range(300), True)
    finally:
        client.close()


def test_a_peer_stalled_in_its_handshake_holds_up_no_later_worker(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """The writer's handshake with each new connection is bounded: one that connects and
    never answers the challenge is dropped, and a worker connecting after it gets through."""
    process, _, seed = writer
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.connect(process.address)  # and says nothing
        started = time.monotonic()
        remote, alice = _registered(process)
        try:
            receipt = remote.append(_note(seed, alice, "after a silent peer"))
        finally:
            remote.close()
    assert isinstance(receipt, Receipt)
    assert time.monotonic() - started < HANDSHAKE_TIMEOUT + 10


class _FailingListener:
    """A listener whose own ``accept`` fails (out of file descriptors) ``failures`` times,
    then is the real one."""

    def __init__(self, real: _Listener | None, failures: float) -> None:
        self.real, self.failures, self.calls = real, failures, 0

    def accept(self) -> Connection:
        self.calls += 1
        if self.calls <= self.failures or self.real is None:
            raise OSError(errno.EMFILE, "Too many open files")
        return self.real.accept()


def _accepting(listener: _FailingListener) -> tuple[_Serving, threading.Thread]:
    serving = _Serving(cast(Any, None), cast(Any, listener), cast(Any, None))
    thread = threading.Thread(target=serving.accept, daemon=True)
    thread.start()
    return serving, thread


class _Pauses(threading.Event):
    """The accept thread's pauses, recorded rather than slept; the ``most``-th is cut short
    by a stop (``wait`` answers True, as when ``stop_accepting`` wakes a pause)."""

    def __init__(self, most: int) -> None:
        super().__init__()
        self.most, self.asked = most, list[float | None]()

    def wait(self, timeout: float | None = None) -> bool:
        self.asked.append(timeout)
        if len(self.asked) >= self.most:
            self.set()
        return self.is_set()


def test_a_failing_listener_is_retried_after_pauses_not_spun_on() -> None:
    """The listener failing over and over (out of file descriptors) is retried after a
    pause that doubles from the first to the longest and stays there, never at once (which
    would spin a core); a stop cuts a pause short and ends the accept thread."""
    serving: _Serving

    class Spun(_FailingListener):  # a loop that stopped pausing ends, and fails below
        def accept(self) -> Connection:
            if self.calls >= 100:
                serving._closed = True
            return super().accept()

    failing = Spun(None, float("inf"))
    serving = _Serving(cast(Any, None), cast(Any, failing), cast(Any, None))
    pauses = _Pauses(10)
    serving._stop_accepting = pauses
    serving.accept()  # returns: the tenth pause was cut short by a stop
    first, most = ACCEPT_BACKOFF
    assert pauses.asked == [min(most, first * 2**n) for n in range(10)]
    assert pauses.asked[-3:] == [most] * 3 and failing.calls == 10
    serving.close(0)


def test_stopping_ends_the_accept_thread_in_its_pause() -> None:
    """Told to stop while its listener keeps failing, the accept thread ends."""
    failing = _FailingListener(None, float("inf"))
    serving, thread = _accepting(failing)
    for _ in range(600):  # until it has failed a few times and pauses a while between
        if failing.calls >= 3:
            break
        time.sleep(0.05)
    serving.stop_accepting()
    thread.join(30)
    assert not thread.is_alive()
    serving.close(0)


def test_a_listener_that_recovers_accepts_the_next_worker(tmp_path: Path) -> None:
    """Once the listener works again, a worker waiting in its backlog gets through."""
    key = os.urandom(32)
    address = str(tmp_path / "writer.sock")
    real = _Listener(address, key)
    serving, thread = _accepting(_FailingListener(real, 3))
    try:
        connection = dial(address, key)  # the handshake completes: it was accepted
        connection.close()
    finally:
        serving.stop_accepting()
        real.close()
        thread.join(5)
        serving.close(0)
    assert not thread.is_alive()


def test_a_worker_cut_off_connects_again_and_writes_on(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """Cut off (here: stalled midway through a request), a worker's callers waiting then are
    told to send again, and its next writes go through a new connection: it is not refused
    writes until it restarts."""
    process, _, seed = writer
    remote, alice = _registered(process)
    try:
        connection = remote._connection  # the test breaks its framing
        assert connection is not None
        _stall_midway(connection)
        deadline = time.monotonic() + MESSAGE_TIMEOUT + 30
        while True:
            try:
                receipt = remote.append(_note(seed, alice, "after the cut"))
                break
            except WriterClosedError:  # cut off, connecting again
                assert time.monotonic() < deadline, "the worker never wrote again"
                time.sleep(0.05)
        assert isinstance(receipt, Receipt) and not receipt.duplicate
        assert remote._connection is not connection  # a new one
    finally:
        remote.close()


def test_a_worker_that_does_not_read_its_answers_holds_up_no_other(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """Answers go out on a thread per worker: one whose answers pile up unread (a stopped
    process; its socket's buffers full) does not stop the writer committing the others'."""
    process, _, seed = writer
    good, alice = _registered(process)
    deaf = _raw(process)
    try:
        stranger = _note(seed, SigningKey.generate(), "whose key is this")
        copies = 8000  # each refused (unknown key): far more answers than a socket buffers

        def flood() -> None:
            with contextlib.suppress(OSError):
                for number in range(copies):
                    deaf.send((number, stranger))

        flooding = threading.Thread(target=flood, daemon=True)
        flooding.start()
        flooding.join(30)
        receipt = good.submit(_note(seed, alice, "not held up")).result(timeout=20)
        assert isinstance(receipt, Receipt) and not receipt.duplicate
        answered = 0
        while answered < copies and deaf.poll(30):  # every copy answered, once read
            answered += len(deaf.recv())
        assert answered == copies
    finally:
        shut_down(deaf)  # a thread may be blocked sending on it
        deaf.close()
        good.close()


def test_envelopes_a_worker_sent_before_it_went_away_are_committed(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """What a worker sent is committed even if the worker is gone before its answers: the
    notes land without being sent again, and sending them again returns their original
    receipts (none lost, none stored twice)."""
    process, home, seed = writer
    remote, alice = _registered(process)
    remote.close()
    reading = home.open(read_only=True)
    first = reading.store.last_position()
    reading.close()
    notes = [_note(seed, alice, f"left behind {n}") for n in range(40)]
    leaving = _raw(process)
    for number, envelope in enumerate(notes):
        leaving.send((number, envelope))
    leaving.close()  # gone before any answer
    ledger = home.open(read_only=True)
    try:
        deadline = time.monotonic() + 30
        while (stored := ledger.store.last_position()) < first + len(notes):
            assert time.monotonic() < deadline, (
                f"the notes of a worker that left were lost: {stored - first} stored"
            )
            time.sleep(0.05)
    finally:
        ledger.close()
    again = RemoteWriter(process.address, process.key)
    try:
        receipts = [again.append(envelope) for envelope in notes]
    finally:
        again.close()
    assert all(r.duplicate for r in receipts)
    assert len({r.position for r in receipts}) == len(notes)


def test_a_stopped_writer_refuses_new_writes_it_cannot_take(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    process, _, seed = writer
    remote = RemoteWriter(process.address, process.key)
    process.stop()
    deadline = time.monotonic() + 10
    with pytest.raises(WriterClosedError):
        while time.monotonic() < deadline:  # the closed socket is seen at the next send
            remote.append(_note(seed, SigningKey.generate(), "too late"))
            time.sleep(0.05)
    remote.close()


def _serve(home: Path, port: int, out: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELINDEX_")}
    with out.open("wb") as log:
        return subprocess.Popen(
            [*CLI, "serve", "--demo", "--home", str(home), "--port", str(port), *SERVE_OPTIONS],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").exists(), reason="reads the process table from /proc")
def test_serve_with_workers_on_sqlite_writes_through_its_writer_process(tmp_path: Path) -> None:
    """`kernelindex serve --workers 2` on SQLite: writes from either worker land (through
    the one writer process) and are read back; stopped, it leaves no process behind."""
    port, log = free_port(), tmp_path / "serve.log"
    process = _serve(tmp_path / "demo", port, log)
    base = f"http://127.0.0.1:{port}"
    children: list[int] = []
    try:
        wait_for_health(base, process, log)
        seed = httpx.get(f"{base}/v1/runs/7e18c26c", timeout=10).json()["digest"]
        alice = SigningKey.generate()
        registered = httpx.post(
            f"{base}/v1/keys/",
            json=key_registration_envelope(alice.public, [Role.ATTESTER], alice),
            timeout=30,
        )
        assert registered.status_code == 201, registered.text
        replies = []
        for n in range(12):  # a new connection each: both workers take some
            replies.append(
                httpx.post(
                    f"{base}/v1/runs/{seed}/attestations",
                    json=_note(seed, alice, f"n{n}"),
                    timeout=30,
                )
            )
        assert [r.status_code for r in replies] == [201] * 12, replies[0].text
        history = httpx.get(f"{base}/v1/runs/{seed}/history", params={"limit": 200}, timeout=30)
        logged = {e["position"] for e in history.json()["events"]}
        assert {r.json()["position"] for r in replies} <= logged
        children = _children(process.pid)
        assert len(children) >= 3, "two HTTP workers and the writer, as child processes"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in children if _alive(p)], log.read_text()[-2000:]


_PARENT = """
import sys, time
from pathlib import Path
from ledger.writer_process import WriterProcess
writer = WriterProcess(Path(sys.argv[1]), sys.argv[2]).start()
print(writer.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(not Path("/proc").exists(), reason="reads the process table from /proc")
def test_the_writer_ends_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    home = LedgerHome.at(tmp_path / "home")
    home.initialise(origin="test.kernelindex/writer").close()
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(home.path), home.db_url],
        cwd=REPO,
        stdout=subprocess.PIPE,
    )
    try:
        assert parent.stdout is not None
        writer_pid = int(parent.stdout.readline())
        assert _alive(writer_pid)
    finally:
        parent.send_signal(signal.SIGKILL)  # no stop(), no shutdown hook
        parent.wait(timeout=30)
    deadline = time.monotonic() + 30
    while _alive(writer_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(writer_pid), "the writer outlived the process that started it"


def test_the_writers_own_commit_time_does_not_count_against_a_workers_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A large request half-read when a slow group commit begins is not late for it: the
    writer read nothing meanwhile (found by a review: the commit's time cut off an honest
    worker whose message was more than a socket buffer)."""
    monkeypatch.setattr(writer_process, "MESSAGE_TIMEOUT", 1.0)
    commits: list[int] = []

    def slow_commit(ledger: Any, envelopes: list[object]) -> list[object]:
        commits.append(len(envelopes))
        if len(commits) == 1:
            time.sleep(1.5)  # a lock wait, say: longer than a message may take
        return [UnknownKeyError("judged") for _ in envelopes]

    monkeypatch.setattr(writer_process, "commit_group", slow_commit)

    class NoListener:
        def accept(self) -> Connection:
            time.sleep(3600)
            raise OSError

    parent, parent_end = Pipe()
    serving = _Serving(cast(Any, None), cast(Any, NoListener()), parent_end)
    small, small_end = Pipe()
    large, large_end = Pipe()
    for end in (small_end, large_end):
        serving.workers[end] = writer_process._Worker(end)
    thread = threading.Thread(target=serving.serve, daemon=True)
    thread.start()
    body = bytes(ForkingPickler.dumps((1, "x" * 1_500_000)))
    frame = struct.pack("!i", len(body)) + body

    def send_large() -> None:
        with socket.socket(fileno=os.dup(large.fileno())) as shared:
            shared.sendall(frame[:100_000])
            time.sleep(0.3)
            with contextlib.suppress(OSError):
                shared.sendall(frame[100_000:])

    sender = threading.Thread(target=send_large)
    try:
        sender.start()
        time.sleep(0.1)
        small.send((0, "small"))
        assert small.poll(30)
        assert large.poll(30)
        ((number, ok, _),) = large.recv()  # answered, not cut off (EOFError)
        assert (number, ok) == (1, False)
    finally:
        sender.join(10)
        parent.send("stop")
        thread.join(10)
        serving.close()


def _health_until(client: TestClient[Litestar], status: int, timeout: float = 120) -> Any:
    """Poll /health until it answers ``status``; that reply."""
    deadline = time.monotonic() + timeout
    while True:
        reply = client.get("/health")
        if reply.status_code == status:
            return reply
        assert time.monotonic() < deadline, f"/health never answered {status}: {reply.text}"
        time.sleep(0.01)


def test_a_killed_writer_is_started_again_and_health_says_so_meanwhile(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """Issue 32 item 5: SIGKILL the writer alone. The worker's /health answers 503 (not 200
    ok) while it cannot reach a writer; the watcher starts a new writer on the same address,
    the worker connects to it by itself, /health is 200 again and writes go on, each in
    the log after the last one committed (dense)."""
    process, home, seed = writer
    reports: list[str] = []
    gave_up: list[str] = []
    process.watch(report=reports.append, give_up=gave_up.append)
    remote, alice = _registered(process)
    ledger = home.open(read_only=True)
    try:
        with TestClient(create_app(ledger, TEST_CONFIG, remote)) as client:
            assert client.get("/health").json()["status"] == "ok"
            first = client.post(f"/v1/runs/{seed}/attestations", json=_note(seed, alice, "1"))
            assert first.status_code == 201, first.text
            killed = process.pid
            assert killed is not None
            os.kill(killed, signal.SIGKILL)
            down = _health_until(client, 503)
            assert down.json()["code"] == "unavailable"
            assert "writer process is not reachable" in down.json()["detail"]
            _health_until(client, 200)
            second = client.post(f"/v1/runs/{seed}/attestations", json=_note(seed, alice, "2"))
            assert second.status_code == 201, second.text
        with ledger.store.transaction(commit=False) as session:
            assert ledger.tlog.tree_size(session) == ledger.store.last_position()  # dense
    finally:
        ledger.close()
    assert second.json()["position"] == first.json()["position"] + 1
    assert process.pid not in (None, killed) and process.running and not gave_up
    assert f"(pid {killed}) ended unasked (killed by SIGKILL)" in reports[0], reports
    assert f"runs again (pid {process.pid})" in reports[-1], reports


def test_a_writer_that_cannot_start_again_is_given_up_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that fails to start again (here its home's trust root is gone) is tried
    MAX_RESTARTS times, then given up on once, with why: never retried forever while
    every write is refused. (What the watcher does, not the store: SQLite alone.)"""
    monkeypatch.setattr(writer_process, "MAX_RESTARTS", 1)
    monkeypatch.setattr(writer_process, "RESTART_BACKOFF", (0.01, 0.01))
    home = LedgerHome.at(tmp_path / "home")
    home.initialise(origin="test.kernelindex/give-up").close()
    process = WriterProcess(home.path, home.db_url).start()
    try:
        _give_up(process, home)
    finally:
        process.stop()


def _give_up(process: WriterProcess, home: LedgerHome) -> None:
    reports: list[str] = []
    reasons: list[str] = []
    gave_up = threading.Event()

    def give_up(reason: str) -> None:
        reasons.append(reason)
        gave_up.set()

    process.watch(report=reports.append, give_up=give_up)
    home.trust_root_path.rename(home.path / "trust-root.json.moved")
    killed = process.pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    assert gave_up.wait(180), reports
    assert len(reasons) == 1 and "could not be kept running" in reasons[0], reasons
    assert "2 times in a row (the last: the ledger's writer process did not start" in reasons[0]
    assert sum("did not start (exit code 1)" in r for r in reports) == 1, reports
    assert not process.running


def test_a_worker_started_while_its_writer_is_down_serves_and_connects_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An HTTP worker (re)started while the writer is down (uvicorn restarts a worker that
    died) comes up rather than fail its start over and over: /health says the writer is
    down, and once the writer runs again the worker connects by itself and writes go on."""
    home = LedgerHome.at(tmp_path / "home")
    home.initialise(origin="test.kernelindex/late-writer").close()
    process = WriterProcess(home.path, home.db_url).start()
    ledger = home.open(read_only=True)
    try:
        killed = process.pid
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        while process.running:
            time.sleep(0.01)
        for name, value in process.env.items():
            monkeypatch.setenv(name, value)
        remote = RemoteWriter.from_env()  # what a worker makes at its start
        assert remote is not None and not remote.connected
        alice = SigningKey.generate()
        with TestClient(create_app(ledger, TEST_CONFIG, remote)) as client:
            assert client.get("/health").json()["code"] == "unavailable"
            process.watch(report=lambda _: None, give_up=lambda _: None)  # starts it again
            _health_until(client, 200)
            registration = key_registration_envelope(alice.public, [Role.ATTESTER], alice)
            posted = client.post("/v1/keys/", json=registration)
            assert posted.status_code == 201, posted.text
        assert process.pid not in (None, killed)
    finally:
        ledger.close()
        process.stop()
