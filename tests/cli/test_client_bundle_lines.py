"""The client reads a bundle line by line as the verifier does: lines end at "\\n" only.

The export writes JSON with the characters str.splitlines also breaks at (U+2028, U+2029,
U+0085) unescaped inside strings, e.g. an artifact's file name; split there, an honest
bundle read through ``kernelindex history --remote`` failed (found by an attack review)."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import zstandard

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


def _gzip_bomb(decoded: int) -> bytes:
    """A gzip stream of ``decoded`` zero bytes: about a thousandth of that on the wire."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    parts = [packer.compress(block) for _ in range(decoded >> 20)]
    return b"".join(parts) + packer.flush()


def _streamed(data: bytes, sent: dict[str, int], size: int = 4096) -> Iterator[bytes]:
    for at in range(0, len(data), size):
        sent["chunks"] = sent.get("chunks", 0) + 1
        yield data[at : at + size]


def test_a_compressed_reply_is_bounded_as_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few kilobytes of gzip that decode to 64 MiB are refused once the decoded bytes pass
    the bound: they are decoded a piece at a time, never whole."""
    monkeypatch.setattr(client_module, "MAX_REPLY_BYTES", 1 << 20)
    bomb = _gzip_bomb(64 << 20)
    assert len(bomb) < 100_000
    sent: dict[str, int] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["accept-encoding"] == "gzip"
        return httpx.Response(
            200, content=_streamed(bomb, sent), headers={"content-encoding": "gzip"}
        )

    with (
        LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client,
        pytest.raises(RemoteError, match="longer than 1,048,576 bytes") as info,
    ):
        client.run_bundle("sha256:" + "a" * 64, [])
    assert info.value.code == "bad-reply"
    assert sent["chunks"] < len(bomb) // 4096 // 4  # stopped early, the rest unread


@pytest.mark.parametrize("coding", ["zstd", "br", "gzip, gzip", "gzip,deflate", "compress"])
def test_a_coding_not_asked_for_is_refused_undecoded(coding: str) -> None:
    """Only one layer of gzip or deflate is asked for and decoded here; zstd (whose frames
    decode some 30,000:1), brotli or stacked layers are refused, not handed to a decoder."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            content=_streamed(b"\x28\xb5\x2f\xfd", {}),
            headers={"content-encoding": coding},
        )

    with (
        LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client,
        pytest.raises(RemoteError, match="which was not asked for") as info,
    ):
        client.run("b" * 8)
    assert info.value.code == "bad-reply"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not gzip at all", "does not decode"),
        (gzip.compress(b'{"digest": "x"}')[:-12], "cut short"),
    ],
)
def test_a_broken_gzip_reply_is_a_bad_reply(body: bytes, message: str) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=_streamed(body, {}), headers={"content-encoding": "gzip"}
        )

    with (
        LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client,
        pytest.raises(RemoteError, match=message) as info,
    ):
        client.run("b" * 8)
    assert info.value.code == "bad-reply"


def test_a_declared_length_past_the_bound_is_refused_before_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client_module, "MAX_REPLY_BYTES", 1 << 20)
    sent: dict[str, int] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            content=_streamed(bytes(2 << 20), sent),
            headers={"content-length": str(2 << 20)},
        )

    with (
        LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client,
        pytest.raises(RemoteError, match=r"\(2,097,152 bytes\) is longer than") as info,
    ):
        client.run("b" * 8)
    assert info.value.code == "bad-reply" and sent == {}


def test_a_reply_that_drips_past_the_deadline_is_cut_off() -> None:
    """Each piece comes well within the read timeout, the whole does not: the client gives
    up at its reply deadline instead of being held for as long as the server likes."""
    sent: dict[str, int] = {}

    def drip() -> Iterator[bytes]:
        while True:
            sent["chunks"] = sent.get("chunks", 0) + 1
            time.sleep(0.05)
            yield b" "

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=drip())

    client = LedgerClient(
        "http://ledger.test", transport=httpx.MockTransport(answer), reply_deadline=0.5
    )
    started = time.monotonic()
    with client, pytest.raises(RemoteError, match=r"took longer than 0.5 s") as info:
        client.run("b" * 8)
    assert info.value.code == "unreachable"
    assert time.monotonic() - started < 2.0 and sent["chunks"] < 20


def test_an_error_reply_keeps_its_reason_phrase() -> None:
    """A proxy's own error page is told by its status line, as the proxy wrote it."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            502,
            content=_streamed(b"<html>down</html>", {}),
            extensions={"reason_phrase": b"Upstream Asleep"},
        )

    with (
        LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client,
        pytest.raises(RemoteError, match="answered 502 Upstream Asleep") as info,
    ):
        client.run("b" * 8)
    assert info.value.code == "http-502"


class _BombServer(http.server.BaseHTTPRequestHandler):
    """A real server on loopback whose reply is a compression bomb sent in chunks."""

    coding = "gzip"
    bomb = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", self.coding)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for at in range(0, len(self.bomb), 8192):
                piece = self.bomb[at : at + 8192]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client hung up, as it should

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("coding", "refusal"), [("gzip", "longer than"), ("zstd", "which was not asked for")]
)
def test_a_bomb_over_a_real_connection_is_refused(
    monkeypatch: pytest.MonkeyPatch, coding: str, refusal: str
) -> None:
    """gzip is decoded within the bound; zstd, whose frames decode some 30,000:1 in one
    piece, is not decoded at all."""
    monkeypatch.setattr(client_module, "MAX_REPLY_BYTES", 4 << 20)
    _BombServer.coding = coding
    if coding == "gzip":
        _BombServer.bomb = _gzip_bomb(256 << 20)
    else:
        _BombServer.bomb = zstandard.ZstdCompressor(level=19).compress(bytes(64 << 20))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BombServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with LedgerClient(url) as client, pytest.raises(RemoteError, match=refusal) as info:
            client.run("b" * 8)
        assert info.value.code == "bad-reply"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("coding", ["gzip", "deflate", "identity"])
def test_a_coded_reply_over_the_wire_decodes_as_sent(coding: str) -> None:
    """Sent in small pieces, as a network does, one layer of gzip or deflate reads back."""
    value = {"digest": "sha256:" + "c" * 64, "note": "x" * 10_000}
    raw = json.dumps(value).encode()
    body = {"gzip": gzip.compress(raw), "deflate": zlib.compress(raw), "identity": raw}[coding]

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=_streamed(body, {}, size=7), headers={"content-encoding": coding}
        )

    with LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client:
        assert client.run("c" * 8) == value
