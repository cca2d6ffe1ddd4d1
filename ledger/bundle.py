"""Self-contained, streamable bundles (JSON Lines) for offline verification (DESIGN.md §9).

Line types, in this order (format ``kernelindex-bundle/v2``; docs/verification.md has why):

``header``       format, origin, creation time, scope (runs, or the whole log)
``trustRoot``    the trust root the ledger was created with (a verifier pins its own)
``checkpoint``   the signed C2SP checkpoint every proof in the bundle is against, with the
                 witnesses' cosignature/v1 lines the ledger holds for its size (a valid
                 signed note still: a reader that knows no witness key ignores them)
``witnessed``    (optional) when a later checkpoint has more cosignatures than this one: that
                 cosigned checkpoint, and the consistency proof that it extends this one
                 (so the witnesses' quorum covers every proof against the older tree)
``consistency``  (any number) a consistency proof from an older tree size to the checkpoint,
                 for checkpoints the requester holds (``export --checkpoint``)
``heads``        (scoped bundles) the log key's signed note of each run's and key's event
                 count and last leaf, and each claimed comparison group's members, at the
                 checkpoint: what makes the bundle provably complete
``headsMap``     (scoped bundles of a ledger with heads leaves) the heads leaf that ends the
                 checkpoint's tree, its inclusion proof, and one map proof per run, key and
                 group of the heads: the heads, as the witnessed tree commits to them
``claim``        the projected state the ledger claims for a run: evidence level and rank in
                 each view (before the events, so a verifier knows which runs to follow)
``event``        one per event, in leaf order: leafIndex, position, aggregate, version, topic,
                 receivedAt, the DSSE envelope as signed, and its inclusion proof (base64)
``artifact``     artifacts the events name by digest, with their bytes, when the ledger has them
``footer``       how many events came before, so truncation is detected

A scoped bundle holds every event of its runs, every member of each group it proves (added to
its runs), and every event of each key that signed any of them, and of the keys that
registered or revoked those, up to keys the trust root names — each with its head. A
whole-log bundle holds every leaf, 0 to the checkpoint's size, and needs no heads.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, NamedTuple
from uuid import UUID

from sqlalchemy import select

from domain.canonical import is_digest
from domain.event_names import EventName
from domain.importers.records import rerun_artifacts
from domain.timestamps import format_time, utc_now
from ledger.aggregates import topic_of
from ledger.application import Ledger
from ledger.bundle_heads import heads_leaf_lines, heads_map_line
from ledger.errors import NotFoundError
from ledger.ids import principal_id, run_id
from ledger.proofs.heads import GroupHead, Head, Heads, sign_heads
from ledger.proofs.log_entries import LogEntry
from ledger.signing.dsse import stored_statement
from ledger.store import cosignatures, signed_checkpoints
from ledger.store.artifacts import ArtifactStore
from ledger.store.cosignatures import CosignedCheckpoint
from ledger.store.event_store import StoreSession
from ledger.store.group_index import members_at
from ledger.store.heads_leaves import HeadsReplay
from ledger.store.signed_checkpoints import SignedCheckpoint
from ledger.store.transparency_log import leaves
from ledger.verify.format import BUNDLE_FORMAT

_BATCH = 500


@dataclass(frozen=True)
class ExportSummary:
    events: int
    tree_size: int
    runs: int | None
    keys: int | None = None
    cosigned_size: int | None = None  # the size of the cosigned checkpoint the bundle carries
    cosignatures: int = 0  # how many witnesses cosigned it


# The events that carry manifests (and so name artifacts a bundle includes).
_CARRY_MANIFESTS = (topic_of(EventName.RUN_INGESTED), topic_of(EventName.RUN_MANIFESTS_ATTACHED))


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def _chunks(items: Sequence[Any], size: int = _BATCH) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True)
class _Scope:
    """What a scoped bundle holds, as of a tree size: aggregates, their heads and leaves."""

    runs: dict[str, Head]
    keys: dict[str, Head]
    groups: dict[str, GroupHead]
    leaves: list[int]  # every leaf of the scope's events, in order


class _Event(NamedTuple):
    aggregate: UUID
    leaf: int
    signer: str | None


def _events_of(
    session: StoreSession, ledger: Ledger, ids: Sequence[UUID], size: int
) -> list[_Event]:
    """Every event of these aggregates in the first ``size`` leaves: its aggregate, leaf and
    the key id that signed it (one read gives a scope's heads, leaves and signers)."""
    events = ledger.store.events.c
    found: list[_Event] = []
    for chunk in _chunks(list(ids)):
        for aggregate, leaf, state in session.execute(
            select(events.originator_id, leaves.c.leaf_index, events.state)
            .join(leaves, leaves.c.position == events.id)
            .where(events.originator_id.in_(chunk), leaves.c.leaf_index < size)
        ):
            signer = json.loads(bytes(state)).get("signer")
            found.append(
                _Event(UUID(str(aggregate)), int(leaf), signer if isinstance(signer, str) else None)
            )
    return found


def _heads_of(rows: Iterable[_Event]) -> dict[UUID, Head]:
    counts: dict[UUID, list[int]] = {}
    for row in rows:
        entry = counts.setdefault(row.aggregate, [0, -1])
        entry[0] += 1
        entry[1] = max(entry[1], row.leaf)
    return {a: Head(n, last) for a, (n, last) in counts.items()}


def _signers(rows: Iterable[_Event]) -> set[str]:
    return {row.signer for row in rows if row.signer}


def bundle_scope(
    ledger: Ledger, session: StoreSession, runs: Iterable[str], groups: Iterable[str], size: int
) -> _Scope:
    """The runs (those asked for and every member of each group), their heads, and the keys
    that signed their events, closed under who registered and revoked those keys."""
    group_heads: dict[str, GroupHead] = {}
    wanted = set(runs)
    for key in sorted(set(groups)):
        if not is_digest(key):
            raise NotFoundError(f"{key[:80]!r} is not a comparison key (sha256:<64 hex>)")
        members = members_at(session, key, size)
        if not members:
            raise NotFoundError(f"no comparison group {key} in the log's first {size} leaves")
        group_heads[key] = GroupHead.of(members)
        wanted.update(members)
    run_ids = {run_id(r): r for r in sorted(wanted)}
    run_events = _events_of(session, ledger, list(run_ids), size)
    by_id = _heads_of(run_events)
    missing = sorted(r for i, r in run_ids.items() if i not in by_id)
    if missing:
        raise NotFoundError(f"run {missing[0]} is not in the log's first {size} leaves")
    run_heads = {run_ids[i]: head for i, head in by_id.items()}
    keys: dict[UUID, str] = {}
    key_events: list[_Event] = []
    frontier = _signers(run_events)
    while frontier:
        new = {principal_id(k): k for k in frontier if principal_id(k) not in keys}
        keys.update(new)
        found = _events_of(session, ledger, list(new), size)
        key_events += found
        frontier = _signers(found) - set(keys.values())
    key_heads = _heads_of(key_events)
    return _Scope(
        run_heads,
        {keys[i]: h for i, h in key_heads.items()},
        group_heads,
        sorted(row.leaf for row in run_events + key_events),
    )


def recompute_heads(ledger: Ledger, session: StoreSession, heads: Heads) -> Heads:
    """The heads the stored log gives, at the same size, for the runs, keys and groups a
    heads note names (``kernelindex audit --heads``: is a signed heads note true?)."""
    size = heads.size
    runs = {run_id(r): r for r in heads.runs}
    keys = {principal_id(k): k for k in heads.keys}
    found = _heads_of(_events_of(session, ledger, [*runs, *keys], size))
    return Heads(
        heads.origin,
        size,
        ledger.tlog.root(session, size),
        {r: found[i] for i, r in runs.items() if i in found},
        {k: found[i] for i, k in keys.items() if i in found},
        {g: GroupHead.of(members_at(session, g, size)) for g in heads.groups},
    )


def event_rows(ledger: Ledger, size: int, wanted: list[int] | None) -> Iterator[list[Any]]:
    """Batches of (leaf_index, position, aggregate, version, topic, state), in leaf order."""
    events = ledger.store.events.c
    columns = (
        leaves.c.leaf_index,
        events.id,
        events.originator_id,
        events.originator_version,
        events.topic,
        events.state,
    )
    if wanted is not None:
        # The scope's rows in leaf order, a batch at a time.
        for chunk in _chunks(wanted):
            with ledger.store.transaction(commit=False) as session:
                yield list(
                    session.execute(
                        select(*columns)
                        .join(ledger.store.events, events.id == leaves.c.position)
                        .where(leaves.c.leaf_index.in_(chunk))
                        .order_by(leaves.c.leaf_index)
                    ).all()
                )
        return
    start = 0
    while start < size:
        query = (
            select(*columns)
            .join(ledger.store.events, events.id == leaves.c.position)
            .where(leaves.c.leaf_index >= start, leaves.c.leaf_index < size)
            .order_by(leaves.c.leaf_index)
            .limit(_BATCH)
        )
        with ledger.store.transaction(commit=False) as session:
            rows = session.execute(query).all()
        if not rows:
            return
        yield list(rows)
        start = int(rows[-1][0]) + 1


def _referenced_artifacts(envelope: dict[str, Any]) -> set[str]:
    """The source snapshot, the implementation source, and the solution and workload a rerun
    agent would fetch, that an ingestion (or an attachment) names by digest: a bundle carries
    what its reader needs to check the run and to ask for its rerun offline."""
    try:
        predicate = stored_statement(envelope)["predicate"]
        manifests = predicate.get("manifests") or {}
        rerun = rerun_artifacts(manifests)
    except (AttributeError, KeyError, TypeError, ValueError):
        return set()
    found = {predicate.get("snapshotDigest"), rerun.solution, rerun.workload}
    implementation = manifests.get("implementation") or {}
    found.add(((implementation.get("spec") or {}).get("source") or {}).get("contentDigest"))
    return {d for d in found if isinstance(d, str)}


@dataclass(frozen=True)
class Witnessed:
    """What a bundle of the tree of one size carries of the witnesses: that checkpoint with
    its cosignatures, and the later cosigned checkpoint that extends it, if one has more."""

    checkpoint: CosignedCheckpoint
    later: CosignedCheckpoint | None = None
    proof: tuple[bytes, ...] = ()  # consistency proof from ``checkpoint`` to ``later``

    @property
    def best(self) -> CosignedCheckpoint:
        return self.later or self.checkpoint


def witnessed(ledger: Ledger, session: StoreSession, signed: SignedCheckpoint) -> Witnessed:
    """The cosigned checkpoints a bundle against ``signed`` carries: its own cosignatures,
    and the later checkpoint with the most cosignatures (newest of those) if it has more."""
    own = cosignatures.cosigned_checkpoint(session, signed.size, signed.root, signed.note)
    best = cosignatures.best_from(session, signed.size)
    if best is None or best == signed.size:
        return Witnessed(own)
    root = ledger.tlog.root(session, best)
    stored = signed_checkpoints.stored(session, best, root)
    if stored is None:
        if not ledger.tlog.can_sign:
            return Witnessed(own)
        # Signed unstored by a witnessing process: Ed25519 signs it again to the same note.
        key = ledger.tlog.signing_key()
        stored = signed_checkpoints.sign(ledger.tlog.origin, key, best, root)
    later = cosignatures.cosigned_checkpoint(session, best, root, stored.note)
    if later.cosignatures <= own.cosignatures:
        return Witnessed(own)
    proof = ledger.tlog.consistency(session, signed.size, best)
    return Witnessed(own, later, tuple(proof))


def export_bundle(
    ledger: Ledger,
    out: IO[str],
    *,
    runs: Iterable[str] | None = None,
    groups: Iterable[str] = (),
    claims: Iterable[dict[str, Any]] = (),
    size: int | None = None,
    held: Iterable[int] = (),
    progress: Callable[[int], None] | None = None,
) -> ExportSummary:
    """Write a bundle of ``runs`` and the members of ``groups`` (None: the whole log) as of
    tree size ``size`` (default: the current tree) to ``out``.

    ``claims`` are claim lines (see ledger.verify.make_claim) about runs of the scope; a claim
    of a rank names its comparison group, which must be among ``groups``. ``held``: tree
    sizes of checkpoints the requester holds; the bundle proves it extends each of them.
    """
    # Read, not signed here: each size a commit left the tree at was signed in that commit.
    checkpoint = ledger.tlog.checkpoint(size)
    size = checkpoint.size
    # A scoped bundle's heads are signed now: without the log key, refuse before writing.
    heads_key = ledger.tlog.signing_key() if runs is not None else None
    scope: _Scope | None = None
    mapped: dict[str, Any] | None = None
    proofs: list[tuple[int, list[bytes]]] = []
    with ledger.store.transaction(commit=False) as session:
        if runs is not None:
            scope = bundle_scope(ledger, session, runs, groups, size)
            mapped = heads_map_line(ledger, session, (scope.runs, scope.keys, scope.groups), size)
        for older in sorted(set(held)):
            if not 0 <= older <= size:
                raise NotFoundError(
                    f"the checkpoint you hold is for {older} leaves; this bundle's is for "
                    f"{size}: the ledger has not reached it (or you hold another log's)"
                )
            proofs.append((older, ledger.tlog.consistency(session, older, size)))
        cosigned = witnessed(ledger, session, checkpoint)
    header_scope: dict[str, Any] = {"all": True}
    if scope is not None:
        header_scope = {"runs": sorted(scope.runs), "groups": sorted(scope.groups)}
    out.write(
        _line(
            {
                "type": "header",
                "format": BUNDLE_FORMAT,
                "origin": ledger.trust_root.origin,
                "createdAt": format_time(utc_now()),
                "scope": header_scope,
            }
        )
    )
    out.write(_line({"type": "trustRoot", "trustRoot": ledger.trust_root.to_json()}))
    _write_checkpoint(out, cosigned, proofs)
    if scope is not None and heads_key is not None:
        heads = Heads(
            ledger.trust_root.origin, size, checkpoint.root, scope.runs, scope.keys, scope.groups
        )
        out.write(_line({"type": "heads", "note": sign_heads(heads, heads_key.private_key())}))
        if mapped is not None:
            out.write(_line(mapped))
    for claim in claims:
        out.write(_line(claim))
    count, referenced = _write_events(ledger, out, size, scope, progress)
    _write_artifacts(ledger, out, referenced)
    out.write(_line({"type": "footer", "events": count}))
    best = cosigned.best
    return ExportSummary(
        events=count,
        tree_size=size,
        runs=len(scope.runs) if scope is not None else None,
        keys=len(scope.keys) if scope is not None else None,
        cosigned_size=best.size if best.cosignatures else None,
        cosignatures=best.cosignatures,
    )


def _write_events(
    ledger: Ledger,
    out: IO[str],
    size: int,
    scope: _Scope | None,
    progress: Callable[[int], None] | None,
) -> tuple[int, set[str]]:
    """The event lines (a whole-log bundle's heads leaves among them, in leaf order): how
    many events, and the artifacts they name."""
    count = 0
    referenced: set[str] = set()
    replay = None
    if scope is None:  # a whole-log bundle holds the heads leaves too, as the leaves they are
        with ledger.store.transaction(commit=False) as session:
            replay = HeadsReplay(session, ledger.trust_root.origin, size)
    for batch in event_rows(ledger, size, scope.leaves if scope is not None else None):
        wanted = [int(r[0]) for r in batch]
        if replay is not None:
            wanted += replay.upcoming(wanted[-1])
        with ledger.store.transaction(commit=False) as session:
            paths = ledger.tlog.proofs(session, wanted, size)
        for leaf_index, position, aggregate, version, topic, state in batch:
            entry = LogEntry.from_stored(
                int(position), str(aggregate), int(version), str(topic), bytes(state)
            )
            count += 1
            if replay is not None:
                out.writelines(map(_line, heads_leaf_lines(replay.before(int(leaf_index)), paths)))
                replay.event(int(leaf_index), int(position), aggregate, int(version))
            _write_event(out, int(leaf_index), entry, paths[int(leaf_index)])
            if entry.topic in (
                topic_of(EventName.RUN_INGESTED),
                topic_of(EventName.RUN_MANIFESTS_ATTACHED),
            ):
                referenced.update(_referenced_artifacts(entry.envelope))
            if progress is not None:
                progress(count)
    if replay is not None and replay.upcoming(size):
        with ledger.store.transaction(commit=False) as session:
            paths = ledger.tlog.proofs(session, replay.upcoming(size), size)
        out.writelines(map(_line, heads_leaf_lines(replay.before(size), paths)))
    return count, referenced


def _write_checkpoint(
    out: IO[str], cosigned: Witnessed, proofs: list[tuple[int, list[bytes]]]
) -> None:
    """The checkpoint line, the witnessed line (if any), and the held checkpoints' proofs."""
    out.write(_line({"type": "checkpoint", "note": cosigned.checkpoint.note}))
    if cosigned.later is not None:
        out.write(
            _line(
                {
                    "type": "witnessed",
                    "note": cosigned.later.note,
                    "proof": [_b64(h) for h in cosigned.proof],
                }
            )
        )
    for older, proof in proofs:
        out.write(_line({"type": "consistency", "from": older, "proof": [_b64(h) for h in proof]}))


def _write_event(out: IO[str], leaf_index: int, entry: LogEntry, proof: list[bytes]) -> None:
    out.write(
        _line(
            {
                "type": "event",
                "leafIndex": leaf_index,
                "position": entry.position,
                "aggregate": entry.aggregate,
                "version": entry.version,
                "topic": entry.topic,
                "receivedAt": entry.received_at,
                "envelope": entry.envelope,
                "proof": [_b64(h) for h in proof],
            }
        )
    )


def _write_artifacts(ledger: Ledger, out: IO[str], referenced: set[str]) -> None:
    store = ArtifactStore(ledger.store)
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
                        "content": _b64(stored.content),
                    }
                )
            )
