"""A bundle's lines about heads leaves (``ledger.store.heads_leaves``): a scoped bundle's
``headsMap`` (the heads leaf ending its tree, with a map proof per run, key and group) and
a whole-log bundle's ``headsLeaf`` lines (each heads leaf, as the leaf it is)."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ledger.ids import principal_id, run_id
from ledger.store.event_store import StoreSession
from ledger.store.heads_leaves import scope_proofs

if TYPE_CHECKING:
    from ledger.application import Ledger


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def heads_map_line(
    ledger: Ledger,
    session: StoreSession,
    scope: tuple[Iterable[str], Iterable[str], Mapping[str, Any]],
    size: int,
) -> dict[str, Any] | None:
    """The headsMap line of a scope (runs, keys, groups by name), when the tree of ``size``
    leaves ends with a heads leaf; else None (the heads stay the log key's word)."""
    runs, keys, groups = scope
    run_ids = {run_id(r): r for r in runs}
    key_ids = {principal_id(k): k for k in keys}
    found = scope_proofs(
        session,
        ledger.store.events,
        ledger.trust_root.origin,
        size,
        (run_ids, key_ids, groups),
        (run_ids, key_ids),
    )
    if found is None:
        return None
    return {
        "type": "headsMap",
        "leafIndex": found.leaf_index,
        "root": _b64(found.root),
        "proof": [_b64(h) for h in ledger.tlog.proof_hashes(session, found.leaf_index, size)],
        "runs": {r: p.to_json() for r, p in sorted(found.runs.items())},
        "keys": {k: p.to_json() for k, p in sorted(found.keys.items())},
        "groups": {g: p.to_json() for g, p in sorted(found.groups.items())},
    }


def heads_leaf_lines(
    found: Iterable[tuple[int, bytes]], paths: Mapping[int, list[bytes]]
) -> Iterator[dict[str, Any]]:
    """A whole-log bundle's headsLeaf line for each (index, map root), with its proof."""
    for index, root in found:
        yield {
            "type": "headsLeaf",
            "leafIndex": index,
            "root": _b64(root),
            "proof": [_b64(h) for h in paths[index]],
        }
