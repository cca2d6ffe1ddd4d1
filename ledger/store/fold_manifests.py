"""The manifest documents fold rows share, stored once by content (``fold_manifests``).

An ingestion's predicate carries every manifest of its run, and most of them (protocol,
environment, often implementation and workload) are the same document in thousands of
runs: stored inside every fold row they tripled the fold table's size (issue 36). So a row
holds its predicate's text with those documents cut out, and where each was cut, the
sha256 of the document's text; the text itself is a row of this table, keyed by that hash.

The key is the hash of the document's *bytes as signed*, not its manifest digest
(``domain.manifests.canonical_form``): two documents with one manifest digest may differ in
metadata, key order, spacing or duration spelling, and the fold reads the predicate as the
signer wrote it. Splicing the cut documents back gives the signer's predicate text byte
for byte (:func:`join` of :func:`split` is the identity: ``tests/ledger/test_fold_manifests.py``).

A reader checks each body it reads against its key: a body that does not hash to it, or
none at all, is as if the event had no fold row (the fold decodes the event), and ``audit``
names it (:func:`wrong_bodies`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence

import msgspec
from sqlalchemy import Column, LargeBinary, MetaData, Table, select

from ledger.store.driver_rows import Insert, insert_tables
from ledger.store.event_store import StoreSession

__all__ = [
    "ManifestBodies",
    "Shared",
    "fold_manifests",
    "insert_of",
    "join",
    "split",
    "write",
    "wrong_bodies",
]

metadata = MetaData()
fold_manifests = Table(
    "kernelindex_fold_manifests",
    metadata,
    Column("digest", LargeBinary, primary_key=True),  # sha256 of ``body``, 32 bytes
    Column("body", LargeBinary, nullable=False),  # a manifest's JSON text, as signed
)

# (offset in the cut text, sha256 of the document cut out there), in text order.
Shared = tuple[tuple[int, bytes], ...]

# A run's own manifest is in no other run's predicate: cut out, it would cost a row here
# and a read per event for nothing. Documents this short are cheaper inline than by key.
# Both decide the rows the commit makes, which ``audit`` remakes byte for byte: changing
# either needs a schema step that rewrites the stored rows (as schema 6's does).
_UNSHARED_ROLES = frozenset({"run"})
_SMALLEST = 128


class _Predicate(msgspec.Struct):
    manifests: dict[str, msgspec.Raw] | None = None


_PREDICATE = msgspec.json.Decoder(_Predicate)


def split(predicate: bytes) -> tuple[bytes, Shared, dict[bytes, bytes]]:
    """A predicate's text with its shared manifest documents cut out: (the cut text, where
    each was cut and its key, the documents by key). A predicate with none to share (or
    not an object with a ``manifests`` object) comes back whole."""
    try:
        manifests = _PREDICATE.decode(predicate).manifests
    except (msgspec.DecodeError, msgspec.ValidationError):
        manifests = None
    if not manifests:
        return predicate, (), {}
    pieces: list[bytes] = []
    shared: list[tuple[int, bytes]] = []
    bodies: dict[bytes, bytes] = {}
    at = cut_length = 0
    for role, raw in manifests.items():
        if role in _UNSHARED_ROLES or len(raw) < _SMALLEST:
            continue  # (a Raw's length is its text's: not copied out to be skipped)
        body = bytes(raw)
        # The documents come in text order; the first occurrence from ``at`` is this one
        # or the same bytes earlier, and splicing the same bytes back gives the same text.
        found = _find(predicate, body, at)
        if found < 0:
            continue
        pieces.append(predicate[at:found])
        cut_length += found - at
        digest = _key_of(body)
        shared.append((cut_length, digest))
        bodies[digest] = body
        at = found + len(body)
    if not shared:
        return predicate, (), {}
    pieces.append(predicate[at:])
    return b"".join(pieces), tuple(shared), bodies


def _find(text: bytes, body: bytes, start: int) -> int:
    """``text.find(body, start)``, sooner: for a needle this long (a manifest, hundreds of
    bytes) ``bytes.find`` first prepares a table over all of it (~9 k instructions a
    predicate, callgrind). Every place the body occurs starts with its first bytes (the
    probe), which a short ``find`` seeks cheaply, and one compare there decides: the first
    place that matches whole is ``find``'s answer. In a predicate's text few places before
    a document start alike; past a few that do, ``find`` itself finishes the search, so a
    text that repeats the probe costs at most a few compares more (test_fold_manifests)."""
    probe = body[:_PROBE]
    if len(probe) < _PROBE:
        return text.find(body, start)
    at = text.find(probe, start)
    for _ in range(_CANDIDATES):
        if at < 0 or text.startswith(body, at):
            return at
        at = text.find(probe, at + 1)
    return text.find(body, at)


_PROBE = 16
_CANDIDATES = 16


def _key_of(body: bytes) -> bytes:
    """The sha256 of a shared document, remembered: the same few documents are in thousands
    of runs (each commit hashed them again, a fifth of its SHA-256 work per ingestion). A
    dict's bytes key matches only the very same bytes, so a hit is that body's own hash."""
    digest = _KEYS.get(body)
    if digest is None:
        digest = hashlib.sha256(body).digest()
        if len(body) <= _KEPT_LARGEST:
            if len(_KEYS) >= _KEPT:
                _KEYS.clear()  # bounded: a new set of shared documents starts it again
            _KEYS[body] = digest
    return digest


_KEYS: dict[bytes, bytes] = {}
_KEPT = 1024
_KEPT_LARGEST = 16 << 10  # at most 16 MiB held; a larger document is hashed each time


def join(cut: bytes, shared: Shared, bodies: Mapping[bytes, bytes]) -> bytes | None:
    """The predicate's text :func:`split` cut, whole again; None where a body is missing."""
    pieces: list[bytes] = []
    at = 0
    for offset, digest in shared:
        body = bodies.get(digest)
        if body is None:
            return None
        pieces += (cut[at:offset], body)
        at = offset
    pieces.append(cut[at:])
    return b"".join(pieces)


def write(session: StoreSession, bodies: Mapping[bytes, bytes]) -> None:
    """The documents rows name, each stored once: one already stored stays (ON CONFLICT DO
    NOTHING: concurrent commits on PostgreSQL sharing a new document wait for the first,
    then keep its row). In key order, so two commits never wait on each other's rows."""
    insert_tables(session, [insert_of(bodies)])


def insert_of(bodies: Mapping[bytes, bytes]) -> Insert:
    """``write``'s INSERT, for ``insert_tables``."""
    return (fold_manifests.name, ("digest", "body"), sorted(bodies.items()), ("digest",))


_PAGE = 500
_KEPT = 4096


class ManifestBodies:
    """A reader's cache of documents by key. Content never changes under a key, and each
    body is checked against its key as it is read, so it is valid across transactions."""

    def __init__(self) -> None:
        self._known: dict[bytes, bytes] = {}

    def read(self, session: StoreSession, digests: Iterable[bytes]) -> Mapping[bytes, bytes]:
        """The documents stored under ``digests`` (those missing, or whose body does not
        hash to its key, absent), read in a query a page of keys not cached yet."""
        wanted = set(digests)
        missing = sorted(wanted - self._known.keys())
        if len(self._known) + len(missing) > _KEPT:
            # A new dict, not cleared: a mapping handed out before stays whole.
            self._known = {}
            missing = sorted(wanted)
        table = fold_manifests.c
        for at in range(0, len(missing), _PAGE):
            page = missing[at : at + _PAGE]
            for digest, body in session.execute(
                select(table.digest, table.body).where(table.digest.in_(page))
            ):
                key, text = bytes(digest), bytes(body)
                if hashlib.sha256(text).digest() == key:
                    self._known[key] = text
        return self._known


def wrong_bodies(session: StoreSession) -> Iterator[tuple[str, str]]:
    """(``sha256:`` key, why) of each stored document that is not the one its key names
    (``audit``'s finding: a fold joining it would read another predicate than the signed
    one; readers skip it and decode the event instead)."""
    table = fold_manifests.c
    after = b""
    while True:
        page: Sequence[tuple[bytes, bytes]] = [
            (bytes(d), bytes(b))
            for d, b in session.execute(
                select(table.digest, table.body)
                .where(table.digest > after)
                .order_by(table.digest)
                .limit(_PAGE)
            )
        ]
        if not page:
            return
        for digest, body in page:
            if hashlib.sha256(body).digest() != digest:
                yield (
                    "sha256:" + digest.hex(),
                    "shared fold manifest is not the document its key names (edited?)",
                )
        after = page[-1][0]
