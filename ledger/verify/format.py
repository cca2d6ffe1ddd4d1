"""The bundle format: its name (what ``ledger.bundle`` writes and ``ledger.verify`` reads) and
how one of its lines is read."""

# No ``from __future__ import annotations``: msgspec reads these Structs' annotations as
# objects, not strings it would compile and evaluate when each is first used (issue 33).

from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple, TextIO

import msgspec

BUNDLE_FORMAT = "kernelindex-bundle/v2"
# The longest line a bundle may have. An artifact line carries its bytes in base64, and an
# artifact holds at most 16 MiB (``ledger.store.artifacts``): ~21.4 M characters. A heads
# line grows by ~79 characters per run and key it covers: this bound holds ~300,000.
MAX_LINE_CHARS = 24 * 1024 * 1024
_SKIP_CHUNK = 1 << 20


class UnreadableLineError(ValueError):
    """A bundle line that is not a JSON document."""

    # The ``format`` finding of such a line, wherever it is read (the verifying process,
    # a worker).
    finding = "not a JSON object"


def read_line(line: str | bytes) -> Any:
    """A bundle line's JSON value. msgspec: a third of ``json.loads``' time, and a bundle is
    read line by line (the routing in the verifying process, the events again in a worker:
    both read with this, so both see the same value). It accepts only standard JSON (no NaN,
    no lone surrogates), which is all ``ledger.bundle`` writes."""
    try:
        return msgspec.json.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise UnreadableLineError(str(exc)) from None
    except UnicodeEncodeError:  # bytes that are not UTF-8, kept as surrogates by open_bundle
        raise UnreadableLineError("not UTF-8") from None


class LineRoute(msgspec.Struct):
    """What the verifying process routes a line by, read without the rest of the line."""

    type: Any = None
    topic: Any = None
    envelope: Any = None  # for the key id it names (``ledger.signing.dsse.named_keyid``)


_ROUTE = msgspec.json.Decoder(LineRoute)


def route_line(line: str) -> LineRoute | None:
    """A line's type, topic and envelope, for routing it to a worker that reads all of it
    with :func:`read_line` (a third of its cost, where the workers do the rest). The same
    values ``read_line`` gives (both take a repeated key's last value), or None where it is
    not a JSON object that decodes so: the caller then reads it whole. It may accept a line
    ``read_line`` refuses (a number out of a float's range in a field it skips): the worker
    reports that line as ``read_line``'s refusal would be reported here."""
    try:
        return _ROUTE.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeEncodeError):
        return None


def open_bundle(path: Path) -> TextIO:
    """A bundle file to read with :func:`bundle_lines`. Bytes that are not UTF-8 are kept
    (as surrogates) for :func:`read_line` to refuse: a line of them fails the format check
    by its number, where decoding the file strictly stopped the whole read with a traceback."""
    return path.open("r", encoding="utf-8", errors="surrogateescape")


class OverlongLine(NamedTuple):
    """A line longer than any the format has, skipped unread (its length, at least)."""

    chars: int


def bundle_lines(handle: TextIO, max_chars: int = MAX_LINE_CHARS) -> Iterator[str | OverlongLine]:
    """A bundle file's lines, none held whole beyond ``max_chars``: a longer one is skipped
    in chunks and stands as an :class:`OverlongLine`, which fails the format check. Without
    this one 200 MB line took 470 MB of memory to be refused."""
    while line := handle.readline(max_chars + 1):
        if len(line) <= max_chars or (len(line) == max_chars + 1 and line.endswith("\n")):
            yield line
            continue
        chars = len(line)
        while chunk := handle.readline(_SKIP_CHUNK):
            chars += len(chunk)
            if chunk.endswith("\n"):
                break
        yield OverlongLine(chars)
