"""Self-contained, streamable bundles (JSON Lines) for offline verification (DESIGN.md §9).

Line types, in this order:

``header``      format, origin, creation time, scope
``trustRoot``   the trust root the ledger was created with (a verifier may pin its own)
``checkpoint``  the signed C2SP checkpoint every inclusion proof in the bundle is against
``claim``       the projected state the ledger claims for a run: evidence level and rank in
                each view (before the events, so a verifier knows which runs to follow)
``event``       one per event, in leaf order: leafIndex, position, aggregate, version, topic,
                receivedAt, the DSSE envelope as signed, and its inclusion proof (base64)
``artifact``    artifacts the events name by digest, with their bytes (source snapshots,
                solution sources), when the ledger holds them
``footer``      how many events came before, so truncation is detected

Key events (every Principal event) are always included, so each signature can be checked
against a key whose registration chains to the trust root.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any
from uuid import UUID

from sqlalchemy import or_, select

from domain.timestamps import format_time, utc_now
from ledger.aggregates import Principal, run_id
from ledger.application import Ledger
from ledger.artifacts import ArtifactStore
from ledger.log_entries import LogEntry
from ledger.transparency_log import leaves

BUNDLE_FORMAT = "kernelindex-bundle/v1"
_BATCH = 500


@dataclass(frozen=True)
class ExportSummary:
    events: int
    tree_size: int
    runs: int | None


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"


def _principal_topics() -> list[str]:
    prefix = f"{Principal.__module__}:{Principal.__qualname__}"
    return [f"{prefix}.Registered", f"{prefix}.Revoked"]


def _event_rows(
    ledger: Ledger, size: int, aggregates: list[UUID] | None
) -> Iterator[tuple[Any, ...]]:
    """(leaf_index, position, aggregate, version, topic, state) in leaf order, batched."""
    events = ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    start = 0
    while start < size:
        query = (
            select(
                leaves.c.leaf_index,
                events.id,
                events.originator_id,
                events.originator_version,
                events.topic,
                events.state,
            )
            .join(events, events.id == leaves.c.position)
            .where(leaves.c.leaf_index >= start, leaves.c.leaf_index < size)
            .order_by(leaves.c.leaf_index)
            .limit(_BATCH)
        )
        if aggregates is not None:
            query = query.where(
                or_(events.originator_id.in_(aggregates), events.topic.in_(_principal_topics()))
            )
        with ledger.recorder.transaction(commit=False) as session:  # type: ignore[attr-defined]
            rows = session.execute(query).all()
        if not rows:
            return
        yield from rows
        start = int(rows[-1][0]) + 1


def _referenced_artifacts(envelope: dict[str, Any]) -> set[str]:
    """The source snapshot and implementation source an ingestion names by digest."""
    try:
        predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    except (KeyError, TypeError, ValueError):
        return set()
    found = {predicate.get("snapshotDigest")}
    implementation = (predicate.get("manifests") or {}).get("implementation") or {}
    found.add(((implementation.get("spec") or {}).get("source") or {}).get("contentDigest"))
    return {d for d in found if isinstance(d, str)}


def export_bundle(
    ledger: Ledger,
    out: IO[str],
    *,
    runs: Iterable[str] | None = None,
    claims: Iterable[dict[str, Any]] = (),
    progress: Callable[[int], None] | None = None,
) -> ExportSummary:
    """Write a bundle of the given runs (None: the whole ledger) to ``out``.

    ``claims`` are claim lines (see ledger.claims.make_claim); a claim about a rank should
    come with every run of that comparison group in ``runs``, or it cannot be verified.
    """
    run_list = sorted(set(runs)) if runs is not None else None
    aggregates = [run_id(d) for d in run_list] if run_list is not None else None
    checkpoint = ledger.tlog.sign_checkpoint()
    size = checkpoint.size
    out.write(
        _line(
            {
                "type": "header",
                "format": BUNDLE_FORMAT,
                "origin": ledger.trust_root.origin,
                "createdAt": format_time(utc_now()),
                "scope": {"runs": run_list} if run_list is not None else {"all": True},
            }
        )
    )
    out.write(_line({"type": "trustRoot", "trustRoot": ledger.trust_root.to_json()}))
    out.write(_line({"type": "checkpoint", "note": checkpoint.note}))
    for claim in claims:
        out.write(_line(claim))
    count = 0
    referenced: set[str] = set()
    for leaf_index, position, aggregate, version, topic, state in _event_rows(
        ledger, size, aggregates
    ):
        entry = LogEntry.from_stored(
            int(position), str(aggregate), int(version), str(topic), bytes(state)
        )
        with ledger.recorder.transaction(commit=False) as session:  # type: ignore[attr-defined]
            proof = ledger.tlog.proof_hashes(session, int(leaf_index), size)
        out.write(
            _line(
                {
                    "type": "event",
                    "leafIndex": int(leaf_index),
                    "position": entry.position,
                    "aggregate": entry.aggregate,
                    "version": entry.version,
                    "topic": entry.topic,
                    "receivedAt": entry.received_at,
                    "envelope": entry.envelope,
                    "proof": [base64.b64encode(h).decode() for h in proof],
                }
            )
        )
        count += 1
        if entry.topic.endswith(":Run.Ingested"):
            referenced.update(_referenced_artifacts(entry.envelope))
        if progress is not None:
            progress(count)
    store = ArtifactStore(ledger.recorder)
    for digest in sorted(referenced):
        if store.has(digest):
            stored = store.get(digest)
            out.write(
                _line(
                    {
                        "type": "artifact",
                        "digest": digest,
                        "mediaType": stored.media_type,
                        "name": stored.name,
                        "content": base64.b64encode(stored.content).decode(),
                    }
                )
            )
    out.write(_line({"type": "footer", "events": count}))
    return ExportSummary(events=count, tree_size=size, runs=len(run_list) if run_list else None)
