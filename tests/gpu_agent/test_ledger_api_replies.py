"""The agent reads the ledger's replies within a bound, as the CLI's client does: the
server is trusted for transport only, so an endless, bomb-coded or oddly coded reply is
refused with an AgentError, its rest unread (one rule: ``domain.content_coding``)."""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Iterator

import httpx
import pytest

from gpu_agent import agent as agent_module
from gpu_agent.agent import AgentError, Device, LedgerApi


def _api(answer: httpx.MockTransport) -> LedgerApi:
    return LedgerApi("http://ledger.test", client=httpx.Client(transport=answer))


def _streamed(data: bytes, sent: dict[str, int], size: int = 65536) -> Iterator[bytes]:
    for at in range(0, len(data), size):
        sent["chunks"] = sent.get("chunks", 0) + 1
        yield data[at : at + size]


def test_an_endless_artifact_is_refused_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_module, "MAX_REPLY_BYTES", 1 << 20)
    sent = {"chunks": 0}

    def endless() -> Iterator[bytes]:
        while True:
            sent["chunks"] += 1
            yield bytes(65536)

    api = _api(httpx.MockTransport(lambda request: httpx.Response(200, content=endless())))
    with pytest.raises(AgentError, match="longer than 1,048,576 bytes"):
        api.artifact("sha256:" + "a" * 64)
    assert sent["chunks"] == 17  # 16 × 64 KiB is the bound; the 17th passes it


def test_a_gzip_bomb_is_refused_decoded_a_piece_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(agent_module, "MAX_REPLY_BYTES", 1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    bomb = b"".join(packer.compress(bytes(1 << 20)) for _ in range(64)) + packer.flush()
    sent: dict[str, int] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["accept-encoding"] == "gzip"
        return httpx.Response(
            200, content=_streamed(bomb, sent, 4096), headers={"content-encoding": "gzip"}
        )

    with pytest.raises(AgentError, match="longer than"):
        _api(httpx.MockTransport(answer)).artifact("sha256:" + "a" * 64)
    assert sent["chunks"] < len(bomb) // 4096 // 4  # stopped early, the rest unread


def test_a_coding_not_asked_for_is_refused() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=_streamed(b"\x28\xb5\x2f\xfd", {}), headers={"content-encoding": "zstd"}
        )

    with pytest.raises(AgentError, match="which was not asked for"):
        _api(httpx.MockTransport(answer)).open_jobs(
            Device("NVIDIA B200", "sm_100", "sha256:" + "0" * 64, "cpu"), "agent-1"
        )


def test_an_honest_gzip_artifact_reads_back_and_is_rehashed() -> None:
    data = b"__global__ void k() {}\n" * 1000
    digest = "sha256:" + hashlib.sha256(data).hexdigest()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            content=_streamed(gzip.compress(data), {}, 97),
            headers={"content-encoding": "gzip"},
        )

    assert _api(httpx.MockTransport(answer)).artifact(digest) == data


def test_a_problem_reply_still_reads_as_the_servers_refusal() -> None:
    problem = b'{"code": "not-found", "detail": "no such artifact"}'

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            404,
            content=_streamed(problem, {}),
            headers={"content-type": "application/problem+json"},
        )

    with pytest.raises(AgentError, match="not-found: no such artifact"):
        _api(httpx.MockTransport(answer)).artifact("sha256:" + "a" * 64)
