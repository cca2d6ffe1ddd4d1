"""The body deadline's one timer per loop keeps asyncio.timeout's behaviour per request: each
request's 408 comes at its own first read plus the timeout (not at another's), a body that
arrives in time is the application's, and a cancel from elsewhere is not turned into a 408."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from api.server.body_deadline import BodyDeadlineMiddleware

TIMEOUT = 0.3
# The deadline-order tests' timeout: long enough that what tells a right timer from a wrong
# one is a second or more apart, so a loaded machine's late event loop cannot blur them (no
# bound here is a speed claim; each upper bound is the deadline a wrong timer would use).
LONG = 3.0
EARLY = 0.05  # asyncio may fire a timer up to its clock resolution early


def _scope(path: str) -> dict[str, Any]:
    return {"type": "http", "path": path, "state": {"request_id": "r-" + path}}


async def _app(scope: Any, receive: Any, send: Any) -> None:
    """Reads the whole body, then answers 200 with it (a disconnect: no answer)."""
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


class Client:
    """A request's receive side fed by the test, and what the middleware sent back, when."""

    def __init__(self) -> None:
        self.chunks: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sent: list[dict[str, Any]] = []
        self.answered_at: float | None = None

    async def receive(self) -> dict[str, Any]:
        return await self.chunks.get()

    async def send(self, message: dict[str, Any]) -> None:
        if self.answered_at is None:
            self.answered_at = asyncio.get_running_loop().time()
        self.sent.append(message)

    @property
    def status(self) -> int | None:
        return self.sent[0]["status"] if self.sent else None


def _serve(middleware: BodyDeadlineMiddleware, path: str, client: Client) -> asyncio.Task[None]:
    return asyncio.ensure_future(middleware(_scope(path), client.receive, client.send))  # type: ignore[arg-type]


def test_each_stalled_request_times_out_at_its_own_deadline() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        middleware = BodyDeadlineMiddleware(_app, LONG)
        early, late, prompt = Client(), Client(), Client()
        start = loop.time()
        tasks = [_serve(middleware, "/early", early)]
        await asyncio.sleep(LONG / 2)
        late_start = loop.time()
        tasks.append(_serve(middleware, "/late", late))
        tasks.append(_serve(middleware, "/prompt", prompt))
        await asyncio.sleep(0.01)
        prompt.chunks.put_nowait({"type": "http.request", "body": b"ab", "more_body": True})
        await asyncio.sleep(0.01)
        prompt.chunks.put_nowait({"type": "http.request", "body": b"c", "more_body": False})
        await asyncio.wait_for(asyncio.gather(*tasks), 5 * LONG)
        assert early.status == 408 and late.status == 408 and prompt.status == 200
        assert prompt.sent[1]["body"] == b"abc"
        assert early.answered_at is not None and late.answered_at is not None
        # Each at its own deadline: not before it, and the early one not held to the later
        # request's (a timer that waits for the newest deadline only).
        assert early.answered_at - start >= LONG - EARLY
        assert early.answered_at < late_start + LONG
        assert late.answered_at - late_start >= LONG - EARLY
        body = json.loads(early.sent[1]["body"])
        assert body["status"] == 408 and body["instance"] == "/early"
        assert (b"connection", b"close") in early.sent[0]["headers"]

    asyncio.run(main())


def test_a_later_chunk_of_an_older_request_is_due_at_its_first_reads_deadline() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        middleware = BodyDeadlineMiddleware(_app, LONG)
        old, young = Client(), Client()
        start = loop.time()
        old_task = _serve(middleware, "/old", old)
        old.chunks.put_nowait({"type": "http.request", "body": b"a", "more_body": True})
        await asyncio.sleep(LONG / 3)
        young_start = loop.time()
        young_task = _serve(middleware, "/young", young)  # the timer now wakes for this one
        await asyncio.sleep(0.01)
        young.chunks.put_nowait({"type": "http.request", "body": b"y"})
        await asyncio.wait_for(asyncio.gather(old_task, young_task), 5 * LONG)
        assert young.status == 200 and old.status == 408
        assert old.answered_at is not None
        # Due at its first read plus the timeout, not re-armed by the later chunk's read
        # nor by the younger request's arrival.
        assert old.answered_at - start >= LONG - EARLY
        assert old.answered_at < young_start + LONG

    asyncio.run(main())


def test_a_cancel_from_elsewhere_is_not_a_408() -> None:
    async def main() -> None:
        middleware = BodyDeadlineMiddleware(_app, TIMEOUT)
        client = Client()
        task = _serve(middleware, "/gone", client)
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(TIMEOUT + 0.05)  # the deadline passes: nothing more is sent
        assert client.sent == []

    asyncio.run(main())


def test_a_body_in_time_then_a_stalled_disconnect_wait_is_not_timed() -> None:
    async def main() -> None:
        seen: list[str] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            seen.append((await receive())["type"])  # waits past the deadline: not timed

        middleware = BodyDeadlineMiddleware(app, TIMEOUT)
        client = Client()
        task = asyncio.ensure_future(middleware(_scope("/"), client.receive, client.send))  # type: ignore[arg-type]
        client.chunks.put_nowait({"type": "http.request", "body": b"x"})
        await asyncio.sleep(TIMEOUT + 0.1)
        client.chunks.put_nowait({"type": "http.disconnect"})
        await asyncio.wait_for(task, 5)
        assert seen == ["http.disconnect"] and client.status == 200

    asyncio.run(main())


def test_a_408_leaves_the_task_uncancelled() -> None:
    """After the deadline's 408 the application reads on (a disconnect) in a task with no
    cancel pending, as asyncio.timeout leaves it."""

    async def main() -> None:
        seen: list[int] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await receive()  # the deadline passes: a disconnect after the 408
            task = asyncio.current_task()
            assert task is not None
            seen.append(task.cancelling())

        middleware = BodyDeadlineMiddleware(app, TIMEOUT)
        client = Client()
        task = asyncio.ensure_future(middleware(_scope("/"), client.receive, client.send))  # type: ignore[arg-type]
        await asyncio.wait_for(task, 5 * LONG)
        assert client.status == 408 and seen == [0]

    asyncio.run(main())


def test_a_cancel_landing_with_the_deadline_stays_a_cancel() -> None:
    """A cancel from elsewhere (a server shutting down) in the same loop turn as the
    deadline: the task is cancelled, no 408 is sent."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        middleware = BodyDeadlineMiddleware(_app, TIMEOUT)
        client = Client()
        task = _serve(middleware, "/both", client)
        await asyncio.sleep(0.01)
        deadlines = middleware._deadlines
        assert deadlines is not None
        (read,) = deadlines.reads
        loop.call_at(read.deadline, task.cancel)  # after the deadline's timer, same turn
        with pytest.raises(asyncio.CancelledError):
            await task
        assert read.expired  # the deadline did fire too
        assert client.sent == []

    asyncio.run(main())


@pytest.mark.parametrize("ending", ["message", "error"])
def test_a_deadline_whose_cancel_is_swallowed_below_is_taken_back(ending: str) -> None:
    """A receive that catches the deadline's cancel and answers anyway: the application gets
    its message, and the task is left with no cancel pending (as asyncio.timeout leaves it);
    one that raises something else instead gets that error, with no cancel pending either."""

    async def main() -> None:
        seen: list[object] = []

        async def receive() -> dict[str, Any]:
            try:
                await asyncio.sleep(10 * LONG)
            except asyncio.CancelledError:
                if ending == "error":
                    raise OSError("the connection broke") from None
            return {"type": "http.request", "body": b"late"}

        async def app(scope: Any, receive: Any, send: Any) -> None:
            try:
                seen.append((await receive())["body"])
            except OSError as exc:
                seen.append(str(exc))
            task = asyncio.current_task()
            assert task is not None
            seen.append(task.cancelling())

        middleware = BodyDeadlineMiddleware(app, TIMEOUT)
        client = Client()
        await asyncio.wait_for(middleware(_scope("/"), receive, client.send), 5 * LONG)  # type: ignore[arg-type]
        expected = b"late" if ending == "message" else "the connection broke"
        assert seen == [expected, 0] and client.sent == []

    asyncio.run(main())
