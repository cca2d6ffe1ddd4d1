"""A reply body read within a bound, its content coding undone a piece at a time.

Both clients of the ledger's API (the CLI's ``LedgerClient`` and the rerun agent) trust the
server for transport only: a reply that never ends, decodes to gigabytes from a few bytes,
or trickles in for ever must be refused, not held. This module is the pure part of that
rule (pieces of bytes in, bytes or a refusal out); each client feeds it its HTTP stream and
a clock, and words the refusal as its own error.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from domain.errors import DomainError

# What a reply may be compressed with: one layer of gzip or deflate (a proxy's), decoded here
# within the bound. Others (br, zstd, stacked layers) are refused, not decoded: they are not
# asked for, and a decoder that is not ours could blow a small reply up past the bound.
ACCEPT_ENCODING = "gzip"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
# The most one decode step yields: what is held passes the bound by at most this much.
_DECODED_PIECE = 1 << 20
# Pieces smaller than this are gathered into one before they are kept.
_GATHERED = 1 << 16


class BadReplyError(DomainError):
    """The reply is not one to read: too long, coded as it was not asked, or broken."""

    code = "bad-reply"


class SlowReplyError(DomainError):
    """The reply did not come whole by its deadline."""

    code = "unreachable"


def _too_long(limit: int, declared: str | None = None) -> BadReplyError:
    size = f" ({int(declared):,} bytes)" if declared else ""
    return BadReplyError(
        f"the server's reply{size} is longer than {limit:,} bytes; not read further"
    )


class StreamedReply(Protocol):
    """What is read of an HTTP reply whose body is not read yet (an ``httpx.Response``)."""

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def is_stream_consumed(self) -> bool: ...

    @property
    def content(self) -> bytes: ...

    def iter_raw(self) -> Iterator[bytes]: ...


def reply_body(reply: StreamedReply, limit: int, expired: Callable[[], bool]) -> bytes:
    """The reply's body decoded, if at most ``limit`` bytes (raw and decoded) that came
    before ``expired()``; else ``BadReplyError`` or ``SlowReplyError``, the rest unread."""
    coding = reply.headers.get("content-encoding", "identity").strip().lower()
    declared = reply.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit and coding in ("", "identity"):
        raise _too_long(limit, declared)
    # A transport that hands over a reply already in memory (a test's, an ASGI app's) has
    # read and decoded it: its bytes are all there is to bound.
    pieces = (
        iter([reply.content])
        if reply.is_stream_consumed
        else _decoded(reply.iter_raw(), coding, limit)
    )
    return _read_within(pieces, limit, expired)


def _read_within(pieces: Iterable[bytes], limit: int, expired: Callable[[], bool]) -> bytes:
    """The pieces joined, if at most ``limit`` bytes that came before ``expired()``; else
    refused as soon as they are not, the rest never read."""
    # Small pieces are gathered before they are kept: a server can send its body in pieces
    # of a byte or two (2-byte chunks), and a list of them holds ~60 bytes of objects for
    # each. One growing buffer for the whole body would over-allocate by an eighth instead.
    kept: list[bytes | bytearray] = []
    small = bytearray()
    size = 0
    for chunk in pieces:
        size += len(chunk)
        if size > limit:
            raise _too_long(limit)
        if expired():
            raise SlowReplyError("the server's reply took too long; not read further")
        if not small and len(chunk) >= _GATHERED:
            kept.append(chunk)  # a big piece is kept as it came, not copied
            continue
        small += chunk
        if len(small) >= _GATHERED:
            kept.append(small)
            small = bytearray()
    kept.append(small)
    return b"".join(kept)


def _decoded(raw: Iterable[bytes], coding: str, limit: int) -> Iterator[bytes]:
    """The reply's bytes with its content coding undone, in pieces of at most
    ``_DECODED_PIECE``: a few compressed bytes that decode to gigabytes are refused by
    ``_read_within`` once past the bound, never decoded whole. The raw bytes count against
    the bound too, and nothing after the coded stream's end is taken in silently."""
    if coding in ("", "identity"):
        yield from raw
        return
    wbits = _WBITS.get(coding)
    if wbits is None:
        raise BadReplyError(f"the server's reply is coded {coding!r}, which was not asked for")
    decoder: Any = None  # zlib's decompressor (its class is private); None before any byte
    seen = 0
    try:
        for piece in _head_whole(raw):
            seen += len(piece)
            if seen > limit:
                raise _too_long(limit)
            data = piece
            while data:
                if decoder is None:
                    decoder = _decompressor(coding, wbits, data)
                elif decoder.eof:
                    if coding == "deflate":
                        raise BadReplyError("bytes after the end of the server's reply")
                    # A gzip reply may hold several members (RFC 1952): each is read.
                    decoder = zlib.decompressobj(wbits)
                yield decoder.decompress(data, _DECODED_PIECE)
                data = decoder.unconsumed_tail or (decoder.unused_data if decoder.eof else b"")
        if decoder is None:
            return  # no body at all (a proxy's empty 502, say): nothing to decode
        yield decoder.flush()
    except zlib.error as exc:
        raise BadReplyError(f"the server's {coding} reply does not decode ({exc})") from None
    if not decoder.eof:
        raise BadReplyError(f"the server's {coding} reply is cut short")


def _head_whole(raw: Iterable[bytes]) -> Iterator[bytes]:
    """The same bytes, the first piece holding at least two when there are two: a network
    may cut anywhere, and ``_decompressor`` tells the deflate kinds apart by two bytes."""
    head: bytes | None = b""
    for piece in raw:
        if head is None:
            yield piece
            continue
        head += piece
        if len(head) >= 2:
            yield head
            head = None
    if head:
        yield head


def _decompressor(coding: str, wbits: int, first: bytes) -> Any:
    """A decoder for the reply's coding. "deflate" is meant to be zlib-wrapped (RFC 9110),
    but some servers send it raw, as browsers and httpx accept: a body without the zlib
    header (its first two bytes a multiple of 31, method 8) is read raw."""
    if coding == "deflate" and not (
        len(first) >= 2 and first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0
    ):
        return zlib.decompressobj(-zlib.MAX_WBITS)
    return zlib.decompressobj(wbits)
