"""Heads: what the log says each run, key and comparison group held at one checkpoint.

An inclusion proof shows that an event is in the log; it cannot show that a bundle holds
*every* event of a run, or every run of a comparison group. The log says so itself, in a
C2SP signed note by the log key, bound to the checkpoint it is about::

    kernelindex-heads/v1
    <origin>
    <tree size>
    <base64 root hash>
    run <run digest> <events> <leaf index of the last>
    key <key id> <events> <leaf index of the last>
    group <comparison key> <members> <base64 SHA-256 of the sorted member digests, one per line>

Lines after the fourth are sorted and unique (runs, then keys, then groups), so one set of
heads has one text. A run's events carry versions 1, 2, ... in the log (their leaves commit to
aggregate and version), so a bundle holds all of them exactly when it holds versions 1 to
``events`` and the last one sits at the stated leaf.

The first line keeps the two kinds of note the log key signs apart: a heads note can never
be read as a checkpoint (whose first line is the origin), nor a checkpoint as heads.

A heads note is the operator's signed word: a false one is evidence against the log (anyone
holding the log to that size can recompute it, ``kernelindex audit --heads``), but unlike a
checkpoint it is not cosigned by witnesses. Pure: no storage.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from domain.canonical import canonical_b64decode
from domain.errors import DomainError
from ledger.proofs.signed_note import NoteError, Verifier, open_note, sign_note

HEADS_FORMAT = "kernelindex-heads/v1"
_DIGEST = r"sha256:[0-9a-f]{64}"
_COUNT = r"0|[1-9][0-9]{0,18}"
_LINE = re.compile(
    rf"^(run|key) ({_DIGEST}) ({_COUNT}) ({_COUNT})$|^group ({_DIGEST}) ({_COUNT}) (\S{{44}})$"
)


class HeadsError(DomainError):
    code = "bad-heads"


class Head(msgspec.Struct, frozen=True):
    """How many events an aggregate has in the log, and the leaf of its last one."""

    events: int
    last_leaf: int


class GroupHead(msgspec.Struct, frozen=True):
    members: int
    digest: bytes  # SHA-256 of the sorted member run digests, one per line

    @classmethod
    def of(cls, members: Iterable[str]) -> GroupHead:
        distinct = set(members)
        return cls(len(distinct), members_digest(distinct))


def member_line(run: str) -> bytes:
    """A member's line in its group's digest. The lines are sorted as these bytes (the
    writer keeps them so as runs join: ``HeadsState.join``), one rule for the writer and
    every verifier (for run digests, all of one length, it is their own order)."""
    return f"{run}\n".encode()


def members_digest(members: Iterable[str]) -> bytes:
    return hashlib.sha256(b"".join(sorted({member_line(m) for m in members}))).digest()


class Heads(msgspec.Struct, frozen=True):
    origin: str
    size: int
    root: bytes
    runs: Mapping[str, Head] = msgspec.field(default_factory=dict)
    keys: Mapping[str, Head] = msgspec.field(default_factory=dict)
    groups: Mapping[str, GroupHead] = msgspec.field(default_factory=dict)

    def text(self) -> str:
        lines = [HEADS_FORMAT, self.origin, str(self.size), base64.b64encode(self.root).decode()]
        lines += [f"run {r} {h.events} {h.last_leaf}" for r, h in sorted(self.runs.items())]
        lines += [f"key {k} {h.events} {h.last_leaf}" for k, h in sorted(self.keys.items())]
        lines += [
            f"group {g} {h.members} {base64.b64encode(h.digest).decode()}"
            for g, h in sorted(self.groups.items())
        ]
        return "".join(line + "\n" for line in lines)


def sign_heads(heads: Heads, private_key: Ed25519PrivateKey) -> str:
    """The heads as a note signed by the log key (named by the origin, as checkpoints are)."""
    return sign_note(heads.text(), heads.origin, private_key)


def parse_heads(text: str) -> Heads:
    """Strictly parse a heads note's text: one spelling per set of heads."""
    if not text.endswith("\n"):
        raise HeadsError("heads text must end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 4 or lines[0] != HEADS_FORMAT:
        raise HeadsError(f"a heads note starts with {HEADS_FORMAT!r}, origin, size and root")
    origin, size_line, root_line = lines[1:4]
    if not re.fullmatch(_COUNT, size_line):
        raise HeadsError(f"heads tree size {size_line!r} is not a decimal number")
    try:
        root = canonical_b64decode(root_line, "heads root")
    except ValueError:
        raise HeadsError("heads root is not canonical base64") from None
    if len(root) != 32:
        raise HeadsError("heads root is not the base64 of a 32-byte hash")
    body = _HeadLines()
    for number, line in enumerate(lines[4:], start=5):
        body.add(number, line)
    heads = Heads(origin, int(size_line), root, body.runs, body.keys, body.groups)
    if heads.text() != text:
        raise HeadsError("heads lines must be sorted: runs, then keys, then groups, by name")
    return heads


class _HeadLines(msgspec.Struct):
    """The run, key and group heads of a heads note, each name once, as they are read."""

    runs: dict[str, Head] = msgspec.field(default_factory=dict)
    keys: dict[str, Head] = msgspec.field(default_factory=dict)
    groups: dict[str, GroupHead] = msgspec.field(default_factory=dict)

    def add(self, number: int, line: str) -> None:
        match = _LINE.match(line)
        if match is None:
            raise HeadsError(f"heads line {number} is not a run, key or group head: {line!r}")
        if match.group(1):
            kind, name, events, last = match.group(1, 2, 3, 4)
            target = self.runs if kind == "run" else self.keys
            if name in target:
                raise HeadsError(f"heads line {number}: {kind} {name} appears twice")
            target[name] = Head(int(events), int(last))
        else:
            name, members, digest_b64 = match.group(5, 6, 7)
            self._add_group(number, name, int(members), digest_b64)

    def _add_group(self, number: int, name: str, members: int, digest_b64: str) -> None:
        try:
            digest = canonical_b64decode(digest_b64, "member digest")
        except ValueError:
            raise HeadsError(
                f"heads line {number}: the member digest is not canonical base64"
            ) from None
        if name in self.groups or len(digest) != 32:
            raise HeadsError(f"heads line {number}: a repeated or malformed group head")
        self.groups[name] = GroupHead(members, digest)


def open_heads(note: str, verifier: Verifier) -> Heads:
    """Verify a heads note under the log's verifier (its name is the origin) and parse it."""
    try:
        opened = open_note(note, [verifier])
    except NoteError as exc:
        raise HeadsError(f"the heads note does not verify: {exc}") from None
    heads = parse_heads(opened.text)
    if heads.origin != verifier.name:
        raise HeadsError(f"heads are for origin {heads.origin!r}, not {verifier.name!r}")
    return heads
