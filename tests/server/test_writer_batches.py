"""A worker's event loop and the writer process (``RemoteWriter.submit_async``): what the
loop's callers submit in one turn goes to the writer in one write, and each batch of answers
wakes the loop once. Every caller still gets its own answer (receipt, refusal, duplicate),
a lost connection tells each caller waiting to send again, a caller that gave up is skipped,
and what was acknowledged is stored once."""

from __future__ import annotations

import asyncio
import pickle
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from domain.statements import Role
from ledger.group_commit import WriterClosedError
from ledger.home import LedgerHome
from ledger.logged_event import LoggedEvent
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.dsse import UnknownKeyError, parse_envelope
from ledger.signing.keys import SigningKey
from ledger.writer_process import RemoteWriter, WriterProcess, shut_down
from ledger.writer_wire import Listener

SEED_NAME = "sol-submission-38823"


def _note(seed: str, key: SigningKey, body: str) -> dict[str, object]:
    return attestation_envelope(seed, SEED_NAME, key, type_="note", body=body)


def _writes(remote: RemoteWriter) -> list[int]:
    """Counts the writes ``remote`` makes to its writer (frames per write)."""
    sizes: list[int] = []
    send = remote._send_outgoing

    def counted(connection: Any) -> None:
        sizes.append(len(remote._outgoing))
        send(connection)

    remote._send_outgoing = counted  # type: ignore[method-assign]
    return sizes


def _wakes(loop: asyncio.AbstractEventLoop) -> list[int]:
    """Counts the calls made onto ``loop`` from other threads."""
    calls: list[int] = []
    threadsafe = loop.call_soon_threadsafe

    def counted(callback: Callable[..., object], *args: Any) -> Any:
        calls.append(1)
        return threadsafe(callback, *args)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
    return calls


def test_a_loop_turns_appends_go_in_one_write_and_each_gets_its_own_answer(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """Many concurrent appends, a refusal and a duplicate among them: one write, and each
    caller its own receipt or refusal; every receipt's envelope stored once."""
    process, home, seed = writer
    remote = RemoteWriter(process.address, process.key)
    try:
        alice = SigningKey.generate()
        remote.append(key_registration_envelope(alice.public, [Role.ATTESTER], alice))
        first = _note(seed, alice, "already stored")
        stored = remote.append(first)
        notes = [_note(seed, alice, f"batched {n}") for n in range(40)]
        stranger = _note(seed, SigningKey.generate(), "who is this")  # never registered
        batch: list[object] = [*notes[:20], stranger, first, *notes[20:]]
        writes = _writes(remote)

        async def submit_all() -> list[LoggedEvent | BaseException]:
            replies = [remote.submit_async(parse_envelope(e)) for e in batch]
            return await asyncio.gather(*replies, return_exceptions=True)

        answers = asyncio.run(submit_all())
    finally:
        remote.close()
    assert writes == [len(batch)]  # one write for the loop's turn
    refused = answers[20]
    assert isinstance(refused, UnknownKeyError)
    duplicate = answers[21]
    assert isinstance(duplicate, LoggedEvent) and duplicate.duplicate
    assert duplicate.position == stored.position
    receipts = [a for i, a in enumerate(answers) if i not in (20, 21)]
    assert all(isinstance(r, LoggedEvent) and not r.duplicate for r in receipts)
    assert [r.envelope_digest for r in receipts if isinstance(r, LoggedEvent)] == [
        parse_envelope(e).digest for e in notes
    ]
    ledger = home.open(read_only=True)
    try:
        for receipt in receipts:
            assert isinstance(receipt, LoggedEvent)
            (record,) = ledger.stored_records(receipt.aggregate_id, receipt.version)
            assert record.position == receipt.position
    finally:
        ledger.close()


def test_a_connection_lost_before_a_turns_write_tells_each_caller_to_send_again(
    writer: tuple[WriterProcess, LedgerHome, str],
) -> None:
    """The connection goes before the turn's write: every caller of the turn hears
    ``WriterClosedError``, and once connected again, sending again stores each once."""
    process, home, seed = writer
    remote = RemoteWriter(process.address, process.key)
    try:
        alice = SigningKey.generate()
        remote.append(key_registration_envelope(alice.public, [Role.ATTESTER], alice))
        notes = [_note(seed, alice, f"lost {n}") for n in range(10)]

        async def submit_then_lose() -> list[LoggedEvent | BaseException]:
            replies = [remote.submit_async(parse_envelope(e)) for e in notes]
            connection = remote._connection
            assert connection is not None
            shut_down(connection)  # before the loop's turn ends and its write is made
            return await asyncio.gather(*replies, return_exceptions=True)

        answers = asyncio.run(submit_then_lose())
        assert all(isinstance(a, WriterClosedError) for a in answers)
        receipts = _again(remote, notes)
    finally:
        remote.close()
    assert [r.envelope_digest for r in receipts] == [parse_envelope(e).digest for e in notes]
    assert len({r.position for r in receipts}) == len(notes)
    ledger = home.open(read_only=True)
    try:
        for receipt in receipts:
            assert len(ledger.stored_records(receipt.aggregate_id, receipt.version)) == 1
    finally:
        ledger.close()


def _again(remote: RemoteWriter, envelopes: list[dict[str, object]]) -> list[LoggedEvent]:
    """Each envelope sent again until the writer takes it (it reconnects in the background)."""

    async def resend() -> list[LoggedEvent]:
        for _ in range(500):
            try:
                replies = [remote.submit_async(parse_envelope(e)) for e in envelopes]
                return list(await asyncio.gather(*replies))
            except WriterClosedError:
                await asyncio.sleep(0.02)
        raise AssertionError("the worker never reached its writer again")

    return asyncio.run(resend())


def _receipt(number: int) -> LoggedEvent:
    return LoggedEvent(number, uuid.uuid4(), 1, "Run.Attested", "d", f"e{number}", "t", False)


class _Peer:
    """A stand-in writer on the wire: it reads ``expect`` requests, then answers the first
    ``answer`` of them in one message (and, with ``refuse``, refuses that one) and closes."""

    def __init__(self, address: str, key: bytes, expect: int, answer: int, refuse: int) -> None:
        self.listener = Listener(address, key)
        self.expect, self.answer, self.refuse = expect, answer, refuse
        self.received: list[tuple[int, object]] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connection = self.listener.accept()
        try:
            while len(self.received) < self.expect:
                self.received.append(pickle.loads(connection.recv_bytes()))
            answers: list[tuple[int, bool, object]] = [
                (n, False, UnknownKeyError("refused"))
                if n == self.refuse
                else (n, True, _receipt(n))
                for n, _ in self.received[: self.answer]
            ]
            connection.send(answers)
        finally:
            connection.close()
            self.listener.close()


def test_a_batch_of_answers_wakes_the_loop_once_and_a_lost_connection_the_rest(
    tmp_path: Path,
) -> None:
    """Half the callers answered in one message (a refusal among them), then the
    connection lost: the answered ones get their answers through one call onto the loop,
    the others ``WriterClosedError``; a caller that gave up is skipped."""
    address, key = str(tmp_path / "w.sock"), b"k" * 32
    peer = _Peer(address, key, expect=8, answer=4, refuse=2)
    remote = RemoteWriter(address, key)
    wakes: list[int] = []

    errors: list[dict[str, object]] = []

    async def submit_all() -> list[LoggedEvent | BaseException]:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: errors.append(context))
        counted = _wakes(loop)
        replies = [remote.submit_async(f"item {n}") for n in range(8)]
        # Its caller gave up, in the middle of the batch answered: answered to nobody, no
        # error, and the callers after it are answered all the same.
        replies[1].cancel()
        # Bounded: a caller left unanswered fails the test instead of hanging it (liveness
        # only, never a speed bound).
        answers = await asyncio.wait_for(asyncio.gather(*replies, return_exceptions=True), 60)
        wakes.extend(counted)
        return answers

    try:
        answers = asyncio.run(submit_all())
    finally:
        remote.close()
        peer.thread.join(10)
    assert [item for _, item in peer.received] == [f"item {n}" for n in range(8)]
    numbers = [n for n, _ in peer.received]
    assert isinstance(answers[0], LoggedEvent) and answers[0].position == numbers[0]
    assert isinstance(answers[1], asyncio.CancelledError)
    assert isinstance(answers[2], UnknownKeyError)
    assert isinstance(answers[3], LoggedEvent) and answers[3].position == numbers[3]
    assert errors == []  # nothing went wrong on the loop settling them
    assert all(isinstance(a, WriterClosedError) for a in answers[4:])
    # One call for the answered batch, one for the callers told the connection is gone.
    assert len(wakes) == 2


def test_a_loop_closed_before_its_turns_write_holds_up_no_later_loop(tmp_path: Path) -> None:
    """A loop closed with its write still due (its callers gone): a later loop's callers
    are sent and answered all the same, the frames left behind with them."""
    address, key = str(tmp_path / "w.sock"), b"k" * 32
    peer = _Peer(address, key, expect=2, answer=2, refuse=-1)
    remote = RemoteWriter(address, key)

    async def submit_and_stop(item: str) -> asyncio.Future[LoggedEvent]:
        asyncio.get_running_loop().stop()  # this turn is the loop's last
        return remote.submit_async(item)

    try:
        first = asyncio.new_event_loop()
        first.run_until_complete(submit_and_stop("left behind"))  # its write never made
        first.close()

        async def later() -> LoggedEvent:
            return await asyncio.wait_for(remote.submit_async("later"), 20)

        answer = asyncio.run(later())
    finally:
        remote.close()
        peer.thread.join(10)
    assert [item for _, item in peer.received] == ["left behind", "later"]
    assert answer.position == peer.received[1][0]
