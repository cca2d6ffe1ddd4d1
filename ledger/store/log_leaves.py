"""A commit's log leaves from the event rows it stored (``TransparencyLog.sequence``).

Each leaf commits to its event as stored: the row's bytes are decoded (``LogEntry.from_stored``)
and the entry's JCS hashed. The envelope is most of an entry, and admission already made its
JCS for the envelope's digest (``Envelope.canonical``): where the stored envelope is provably
the one it parsed, those bytes are taken instead of canonicalising the stored one again
(:func:`entry_data`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Recording

from ledger.proofs.hasher import leaf_hash
from ledger.proofs.log_entries import LogEntry
from ledger.proofs.merkle import CompactRange
from ledger.signing.dsse import Envelope
from ledger.store.driver_rows import dialect_of, insert_tables
from ledger.store.event_store import StoreSession
from ledger.store.log_tables import leaves, nodes
from ledger.store.sqlite_blobs import blob_param
from ledger.store.tree_nodes import NodeKey

__all__ = ["NO_PARSED", "Parsed", "StoredRow", "add_leaves", "entry_data", "parsed_at"]

# An event row as stored: position, originator id, version, topic, state bytes.
StoredRow = tuple[int, Any, int, str, bytes] | Sequence[Any]
# The envelopes admission parsed, by the position of the event that stores each.
Parsed = Mapping[int, Envelope]
NO_PARSED: Parsed = {}

_LEAF_COLUMNS = ("leaf_index", "position", "leaf_hash")
_NODE_COLUMNS = ("level", "idx", "hash")


def add_leaves(
    session: StoreSession,
    rows: Sequence[StoredRow],
    compact: CompactRange,
    held: dict[NodeKey, bytes],
    leaf_of: dict[int, int],
    logged: list[tuple[Any, int, int, str, Any]],
    parsed: Parsed = NO_PARSED,
) -> bytes:
    """Append the leaves of ``rows`` (in position order) and store them and the nodes
    they complete; return the last leaf's hash. ``logged`` gets each one's aggregate,
    version, leaf index and topic (a heads leaf's update). ``parsed``: :func:`parsed_at`."""
    leaf_rows: list[tuple[int, int, Any]] = []
    node_rows: list[tuple[int, int, Any]] = []
    dialect = dialect_of(session)  # hashes bound as ``blob_param`` says
    digest = b""
    for position, aggregate, version, topic, state in rows:
        entry = LogEntry.from_stored(
            int(position), str(aggregate), int(version), str(topic), bytes(state)
        )
        digest = leaf_hash(entry_data(entry, parsed.get(entry.position)))
        leaf_rows.append((compact.size, int(position), blob_param(dialect, digest)))
        leaf_of[int(position)] = compact.size
        logged.append((aggregate, int(version), compact.size, str(topic), state))
        for n in compact.append(digest):
            node_rows.append((n.level, n.index, blob_param(dialect, n.hash)))
            held[(n.level, n.index)] = n.hash
    # Through the driver (ledger.store.driver_rows): rows of fixed shape, one statement.
    leaf_insert = (leaves.name, _LEAF_COLUMNS, leaf_rows, ())
    insert_tables(session, [leaf_insert, (nodes.name, _NODE_COLUMNS, node_rows, ())])
    return digest


def entry_data(entry: LogEntry, parsed: Envelope | None) -> bytes:
    """The leaf data of an entry decoded from its stored bytes. Its envelope's JCS bytes are
    the ``parsed`` envelope's where that envelope is of exact dicts, lists and strings
    (``made is None``: ``parse_envelope`` checked it so) and the stored one, decoded, equals
    it: a value equal to such a tree is that tree (a string equals only a string), and equal
    trees have one JCS. Anything else is canonicalised from the stored value, as always."""
    if parsed is not None and parsed.made is None and entry.envelope == parsed.raw:
        return entry.data_given(parsed.canonical)
    return entry.data()


def parsed_at(recordings: Sequence[Recording[UUID]], envelopes: Sequence[object]) -> Parsed:
    """The parsed envelopes (``Envelope``, or a ``Checked`` one) among a group's, by the
    position of the event that stores each: the one whose stored envelope holds that very
    payload text (``_signed`` copies ``raw``, not its strings). Which is which only saves
    work: :func:`entry_data` checks each against the stored bytes before taking its JCS."""
    by_text: dict[int, Envelope] = {}
    for item in envelopes:
        envelope = getattr(item, "envelope", item)
        if type(envelope) is Envelope:
            by_text[id(envelope.raw.get("payload"))] = envelope
    found: dict[int, Envelope] = {}
    for recording in recordings:
        stored = getattr(recording.domain_event, "envelope", None)
        if type(stored) is dict:
            text = stored.get("payload")
            envelope = by_text.get(id(text))
            if envelope is not None and envelope.raw.get("payload") is text:
                found[recording.notification.id] = envelope
    return found
