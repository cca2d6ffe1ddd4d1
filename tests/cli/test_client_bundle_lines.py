"""The client reads a bundle line by line as the verifier does: lines end at "\\n" only.

The export writes JSON with the characters str.splitlines also breaks at (U+2028, U+2029,
U+0085) unescaped inside strings, e.g. an artifact's file name; split there, an honest
bundle read through ``kernelindex history --remote`` failed (found by an attack review)."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

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
        (gzip.compress(b'{"digest": "x"}', mtime=0)[:-12], "cut short"),
    ],
    # Named: an id made from gzip bytes holds the time, and xdist's workers must agree.
    ids=["not gzip", "cut short"],
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


def _answering(body: bytes, status: int = 200, **headers: str) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=_streamed(body, {}, size=5), headers=headers)

    return httpx.MockTransport(answer)


@pytest.mark.parametrize(
    "after",
    [b"\xff" * 100, bytes(100), gzip.compress(b"x", mtime=0)[:5]],
    ids=["junk", "zeros", "a cut member"],
)
def test_bytes_after_the_coded_stream_are_refused_not_ignored(after: bytes) -> None:
    """Bytes after a gzip stream's end are no second member: refused, not dropped (zlib
    kept them, and copied them again with every piece, taking memory and a core)."""
    body = gzip.compress(json.dumps({"digest": "x"}).encode()) + after
    transport = _answering(body, **{"content-encoding": "gzip"})
    with (
        LedgerClient("http://ledger.test", transport=transport) as client,
        pytest.raises(RemoteError) as info,
    ):
        client.run("b" * 8)
    assert info.value.code == "bad-reply"
    assert "does not decode" in info.value.message or "cut short" in info.value.message


def test_bytes_after_a_deflate_stream_are_refused() -> None:
    transport = _answering(zlib.compress(b"{}") + b"more", **{"content-encoding": "deflate"})
    with (
        LedgerClient("http://ledger.test", transport=transport) as client,
        pytest.raises(RemoteError, match="bytes after the end") as info,
    ):
        client.run("b" * 8)
    assert info.value.code == "bad-reply"


def test_a_gzip_reply_of_several_members_reads_whole() -> None:
    """RFC 1952 allows several members; the bundle is every one of them, not the first."""
    lines = [json.dumps({"line": i}) + "\n" for i in range(3)]
    body = gzip.compress(lines[0].encode()) + gzip.compress((lines[1] + lines[2]).encode())
    transport = _answering(body, **{"content-encoding": "gzip"})
    with LedgerClient("http://ledger.test", transport=transport) as client:
        assert client.run_bundle("sha256:" + "a" * 64, []) == [line[:-1] for line in lines]


def test_raw_deflate_reads_as_browsers_read_it() -> None:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = packer.compress(json.dumps({"digest": "d"}).encode()) + packer.flush()
    transport = _answering(body, **{"content-encoding": "deflate"})
    with LedgerClient("http://ledger.test", transport=transport) as client:
        assert client.run("d" * 8) == {"digest": "d"}


def test_an_empty_coded_error_page_is_told_by_its_status() -> None:
    transport = _answering(b"", 502, **{"content-encoding": "gzip"})
    with (
        LedgerClient("http://ledger.test", transport=transport) as client,
        pytest.raises(RemoteError) as info,
    ):
        client.run("b" * 8)
    assert info.value.code == "http-502"


def test_a_bomb_is_held_to_about_the_bound_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoded a megabyte at a time: what is held passes the bound by at most that, not by
    a whole bound's worth decoded in one step."""
    monkeypatch.setattr(client_module, "MAX_REPLY_BYTES", 16 << 20)
    bomb = _gzip_bomb(256 << 20)
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, content=_streamed(bomb, {}, size=65536), headers={"content-encoding": "gzip"}
        )
    )
    tracemalloc.start()
    try:
        with (
            LedgerClient("http://ledger.test", transport=transport) as client,
            pytest.raises(RemoteError, match="longer than"),
        ):
            client.run("b" * 8)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (16 << 20) * 1.25


@pytest.mark.parametrize("coding", ["identity", "gzip"])
def test_a_reply_in_tiny_pieces_is_held_at_about_its_size(coding: str) -> None:
    """A chunked reply of 2-byte chunks arrives as 2-byte pieces: held in one buffer, not
    as a list of tiny objects (~60 bytes each, ~30× the body and so far past the bound)."""
    data = bytes(range(256)) * 1600  # 400 KiB, incompressible enough to stay many pieces
    wire = gzip.compress(data, mtime=0) if coding == "gzip" else data
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200,
            content=_streamed(wire, {}, size=2),
            headers={"content-encoding": coding},
        )
    )
    tracemalloc.start()
    try:
        with LedgerClient("http://ledger.test", transport=transport) as client:
            got = client.artifact("sha256:" + hashlib.sha256(data).hexdigest())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == data
    assert peak < 4 * len(data), f"{peak:,} bytes held for a {len(data):,}-byte reply"


def test_the_deadline_counts_from_the_request() -> None:
    """A server slow to start its reply spends the same allowance as one slow to send it."""

    def answer(request: httpx.Request) -> httpx.Response:
        time.sleep(0.6)
        return httpx.Response(200, content=_streamed(b"{}", {}))

    client = LedgerClient(
        "http://ledger.test", transport=httpx.MockTransport(answer), reply_deadline=0.5
    )
    with client, pytest.raises(RemoteError, match=r"took longer than 0\.5 s") as info:
        client.run("b" * 8)
    assert info.value.code == "unreachable"


def _coded(data: bytes, coding: str, members: int) -> tuple[bytes, str]:
    if coding == "gzip":
        cut = [
            data[i * len(data) // members : (i + 1) * len(data) // members] for i in range(members)
        ]
        return b"".join(gzip.compress(part) for part in cut), "gzip"
    if coding == "deflate":
        return zlib.compress(data), "deflate"
    if coding == "raw deflate":
        packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        return packer.compress(data) + packer.flush(), "deflate"
    return data, "identity"


@settings(max_examples=150, deadline=None)
@given(
    data=st.binary(max_size=4096),
    coding=st.sampled_from(["identity", "gzip", "deflate", "raw deflate"]),
    members=st.integers(1, 4),
    size=st.integers(1, 600),
)
def test_an_honest_reply_reads_back_exactly_however_it_is_coded_and_cut(
    data: bytes, coding: str, members: int, size: int
) -> None:
    """Property: whatever the bytes, their coding (one layer, gzip in several members) and
    how the network cuts them, an artifact fetched reads back as itself (it is re-hashed)."""
    body, label = _coded(data, coding, members)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=_streamed(body, {}, size=size), headers={"content-encoding": label}
        )

    with LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client:
        assert client.artifact(digest) == data
