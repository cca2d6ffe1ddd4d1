"""The client reads a bundle line by line as the verifier does: lines end at "\\n" only.

The export writes JSON with the characters str.splitlines also breaks at (U+2028, U+2029,
U+0085) unescaped inside strings, e.g. an artifact's file name; split there, an honest
bundle read through ``kernelindex history --remote`` failed (found by an attack review)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import httpx
import pytest

from api import client as client_module
from api.client import LedgerClient, RemoteError


def test_a_bundle_line_holding_a_line_separator_stays_one_line() -> None:
    records = [
        {"type": "header", "name": "results\u2028trace.json"},
        {"type": "artifact", "name": "a\u2029b\x85c"},
    ]
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=body, headers={"content-type": "application/x-ndjson"})

    with LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client:
        lines = client.run_bundle("sha256:" + "a" * 64, [])
    assert [json.loads(line) for line in lines] == records


def test_a_reply_past_the_bound_is_refused_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server is trusted for transport only: a reply that never ends is refused once it
    passes ``MAX_REPLY_BYTES``, with what was sent after it never read."""
    monkeypatch.setattr(client_module, "MAX_REPLY_BYTES", 1 << 20)
    sent = {"chunks": 0}

    def endless() -> Iterator[bytes]:
        while True:
            sent["chunks"] += 1
            yield b'{"type": "event"}\n' * 4096  # 72 KiB

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=endless(), headers={"content-type": "text/plain"})

    with (
        LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client,
        pytest.raises(RemoteError, match="longer than 1,048,576 bytes") as info,
    ):
        client.run_bundle("sha256:" + "a" * 64, [])
    assert info.value.code == "bad-reply"
    assert sent["chunks"] == 15  # 14 × 72 KiB is within 1 MiB; the 15th passes it


def test_a_reply_within_the_bound_reads_as_before() -> None:
    """Problem replies keep their code and detail; JSON replies decode (gzip too)."""
    body = gzip.compress(json.dumps({"digest": "sha256:" + "b" * 64}).encode())

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("missing"):
            problem = {"type": "https://kernelindex.dev/problems/not-found", "detail": "no run"}
            return httpx.Response(404, json=problem)
        return httpx.Response(200, content=body, headers={"content-encoding": "gzip"})

    with LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client:
        assert client.run("b" * 8) == {"digest": "sha256:" + "b" * 64}
        with pytest.raises(RemoteError, match="no run") as info:
            client.run("missing")
    assert info.value.code == "not-found" and info.value.status == 404
