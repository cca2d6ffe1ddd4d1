"""After a run: every acknowledged append is in the database as sent, its inclusion proof verifies
against the recomputed log, and the log is dense.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from sqlalchemy import select

from benchmarks.http.load import Reply
from ledger.application import Ledger
from ledger.proofs.log_entries import LogEntry
from ledger.proofs.merkle import CompactRange, ProofError, verify_inclusion
from ledger.store.transparency_log import leaves

# ------------------------------------------------------------------------- verification


def verify_acknowledged(ledger: Ledger, replies: list[Reply]) -> dict[str, Any]:
    """Every 201 receipt against the database, read directly (the server is stopped).

    For each receipt: the event at its position is the envelope that was sent (same
    aggregate and version, byte-equal envelope, same digest); its leaf index is the one the
    log gave that position; its inclusion proof verifies against the root it names; and that
    root is the root of the log recomputed here, from the stored events' own bytes, at the
    tree size the proof names. Then the log must be dense: events == leaves == tree size.
    """
    events: dict[int, Any] = {}
    start = 1
    while True:
        batch = ledger.recorder.select_notifications(start, 1000)
        for n in batch:
            events[n.id] = n
        if len(batch) < 1000:
            break
        start = batch[-1].id + 1
    with ledger.store.transaction(commit=False) as session:
        rows = session.execute(
            select(leaves.c.leaf_index, leaves.c.position, leaves.c.leaf_hash).order_by(
                leaves.c.leaf_index
            )
        ).all()
    leaf_of = {int(r[1]): int(r[0]) for r in rows}
    # The log recomputed from the events' bytes, in leaf order: the root at every size.
    compact = CompactRange()
    roots: list[bytes] = []
    stored_hash_mismatches = 0
    for _, position, stored_hash in rows:
        event = events.get(int(position))
        if event is None:
            stored_hash_mismatches += 1
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
            stored_hash_mismatches += mine != bytes(stored_hash)
            compact.append(mine)
        roots.append(compact.root())  # roots[size - 1]

    acknowledged = [r for r in replies if r.status == 201]
    present = mismatched = missing = proofs_ok = roots_ok = leaf_ok = 0
    problems: list[str] = []
    positions: set[int] = set()
    for reply in acknowledged:
        receipt = json.loads(reply.body)
        position = int(receipt["position"])
        positions.add(position)
        stored = events.get(position)
        if stored is None:
            missing += 1
            problems.append(f"position {position} ({reply.planned.digest}) is not stored")
            continue
        state = json.loads(stored.state)
        same = (
            str(stored.originator_id) == receipt["aggregateId"]
            and stored.originator_version == receipt["version"]
            and state.get("envelope") == reply.planned.envelope
            and state.get("envelope_digest") == reply.planned.digest == receipt["envelopeDigest"]
        )
        if not same:
            mismatched += 1
            problems.append(f"position {position} holds another event than {reply.planned.digest}")
            continue
        present += 1
        log = receipt.get("log") or {}
        try:
            leaf_index, size = int(log["leafIndex"]), int(log["treeSize"])
            if leaf_of.get(position) == leaf_index:
                leaf_ok += 1
            root = base64.b64decode(log["rootHash"])
            hashes = [base64.b64decode(h) for h in log["hashes"]]
            entry = LogEntry.from_stored(
                position, receipt["aggregateId"], receipt["version"], stored.topic, stored.state
            )
            verify_inclusion(entry.leaf_hash(), leaf_index, size, hashes, root)
            proofs_ok += 1
            if 0 < size <= len(roots) and roots[size - 1] == root:
                roots_ok += 1
        except (KeyError, TypeError, ValueError, ProofError) as exc:
            problems.append(f"position {position}: proof does not verify ({exc})")

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
        "present": present,
        "lost": missing,
        "mismatched": mismatched,
        "duplicatePositions": len(acknowledged) - len(positions),
        "leafIndexMatches": leaf_ok,
        "proofsVerified": proofs_ok,
        "rootsMatchRecomputedLog": roots_ok,
        "unacknowledgedButStored": len(sent_unacknowledged & stored_digests),
        "events": len(events),
        "treeSize": tree_size,
        "storedLeafHashMismatches": stored_hash_mismatches,
        "dense": dense,
        "problems": problems[:10],
    }
