"""After a run: every acknowledged append is in the database as sent, its inclusion proof verifies
against the recomputed log, and the log is dense.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from benchmarks.http.load import Reply
from ledger.application import Ledger
from ledger.proofs.log_entries import LogEntry
from ledger.proofs.merkle import CompactRange, ProofError, verify_inclusion
from ledger.store.transparency_log import leaves

# ------------------------------------------------------------------------- verification


def _stored_events(ledger: Ledger) -> dict[int, Any]:
    events: dict[int, Any] = {}
    start = 1
    while True:
        batch = ledger.recorder.select_notifications(start, 1000)
        for n in batch:
            events[n.id] = n
        if len(batch) < 1000:
            return events
        start = batch[-1].id + 1


def _recomputed_roots(events: dict[int, Any], rows: list[Any]) -> tuple[list[bytes], int]:
    """The log recomputed from the events' bytes, in leaf order: the root at every size
    (``roots[size - 1]``), and how many stored leaf hashes differ from the recomputed."""
    compact = CompactRange()
    roots: list[bytes] = []
    mismatches = 0
    for _, position, stored_hash in rows:
        event = events.get(int(position))
        if event is None:
            mismatches += 1
            compact.append(bytes(stored_hash))
        else:
            entry = LogEntry.from_stored(
                event.id,
                str(event.originator_id),
                event.originator_version,
                event.topic,
                bytes(event.state),
            )
            mine = entry.leaf_hash()
            mismatches += mine != bytes(stored_hash)
            compact.append(mine)
        roots.append(compact.root())
    return roots, mismatches


@dataclass
class _Tally:
    present: int = 0
    mismatched: int = 0
    missing: int = 0
    proofs_ok: int = 0
    roots_ok: int = 0
    leaf_ok: int = 0
    problems: list[str] = field(default_factory=list)
    positions: set[int] = field(default_factory=set)


def _check_reply(
    reply: Reply,
    events: dict[int, Any],
    leaf_of: dict[int, int],
    roots: list[bytes],
    tally: _Tally,
) -> None:
    receipt = json.loads(reply.body)
    position = int(receipt["position"])
    tally.positions.add(position)
    stored = events.get(position)
    if stored is None:
        tally.missing += 1
        tally.problems.append(f"position {position} ({reply.planned.digest}) is not stored")
        return
    state = json.loads(stored.state)
    same = (
        str(stored.originator_id) == receipt["aggregateId"]
        and stored.originator_version == receipt["version"]
        and state.get("envelope") == reply.planned.envelope
        and state.get("envelope_digest") == reply.planned.digest == receipt["envelopeDigest"]
    )
    if not same:
        tally.mismatched += 1
        tally.problems.append(
            f"position {position} holds another event than {reply.planned.digest}"
        )
        return
    tally.present += 1
    log = receipt.get("log") or {}
    try:
        leaf_index, size = int(log["leafIndex"]), int(log["treeSize"])
        if leaf_of.get(position) == leaf_index:
            tally.leaf_ok += 1
        root = base64.b64decode(log["rootHash"])
        hashes = [base64.b64decode(h) for h in log["hashes"]]
        entry = LogEntry.from_stored(
            position, receipt["aggregateId"], receipt["version"], stored.topic, stored.state
        )
        verify_inclusion(entry.leaf_hash(), leaf_index, size, hashes, root)
        tally.proofs_ok += 1
        if 0 < size <= len(roots) and roots[size - 1] == root:
            tally.roots_ok += 1
    except (KeyError, TypeError, ValueError, ProofError) as exc:
        tally.problems.append(f"position {position}: proof does not verify ({exc})")


def verify_acknowledged(ledger: Ledger, replies: list[Reply]) -> dict[str, Any]:
    """Every 201 receipt against the database, read directly (the server is stopped).

    For each receipt: the event at its position is the envelope that was sent (same
    aggregate and version, byte-equal envelope, same digest); its leaf index is the one the
    log gave that position; its inclusion proof verifies against the root it names; and that
    root is the root of the log recomputed here, from the stored events' own bytes, at the
    tree size the proof names. Then the log must be dense: events == leaves == tree size.
    """
    events = _stored_events(ledger)
    with ledger.store.transaction(commit=False) as session:
        rows = list(
            session.execute(
                select(leaves.c.leaf_index, leaves.c.position, leaves.c.leaf_hash).order_by(
                    leaves.c.leaf_index
                )
            ).all()
        )
    leaf_of = {int(r[1]): int(r[0]) for r in rows}
    roots, stored_hash_mismatches = _recomputed_roots(events, rows)
    acknowledged = [r for r in replies if r.status == 201]
    tally = _Tally()
    for reply in acknowledged:
        _check_reply(reply, events, leaf_of, roots, tally)
    sent_unacknowledged = {r.planned.digest for r in replies if r.status != 201}
    stored_digests = {json.loads(n.state).get("envelope_digest") for n in events.values()}
    tree_size = len(rows)
    dense = (
        len(events) == tree_size
        and [int(r[0]) for r in rows] == list(range(tree_size))
        and [int(r[1]) for r in rows] == sorted(events)
    )
    return {
        "acknowledged": len(acknowledged),
        "present": tally.present,
        "lost": tally.missing,
        "mismatched": tally.mismatched,
        "duplicatePositions": len(acknowledged) - len(tally.positions),
        "leafIndexMatches": tally.leaf_ok,
        "proofsVerified": tally.proofs_ok,
        "rootsMatchRecomputedLog": tally.roots_ok,
        "unacknowledgedButStored": len(sent_unacknowledged & stored_digests),
        "events": len(events),
        "treeSize": tree_size,
        "storedLeafHashMismatches": stored_hash_mismatches,
        "dense": dense,
        "problems": tally.problems[:10],
    }
