"""One C2SP ``tlog-proof@v1`` file per event (``export --proofs DIR``): each event's index,
its inclusion proof and the cosigned checkpoint, with its leaf data as the extra line, so
any tlog-proof verifier can check the event without this project
(``ledger.witness.tlog_proof`` has the format and this project's own verifier).

Every file of one call is against one checkpoint: the cosigned checkpoint with the most
cosignatures from the size that holds every leaf asked for (``cosignatures.best_from``), or,
with none cosigned, the log's newest signed checkpoint (then the files prove inclusion under
the log key alone, and a verifier's witness policy refuses them, as it should).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ledger.application import Ledger
from ledger.bundle import event_rows
from ledger.proofs.log_entries import LogEntry
from ledger.store import cosignatures
from ledger.store.cosignatures import CosignedCheckpoint
from ledger.verify.format import bundle_lines, open_bundle, read_line
from ledger.witness.tlog_proof import FILE_SUFFIX, format_tlog_proof

__all__ = ["ProofFiles", "bundle_leaves", "proof_file_name", "write_tlog_proofs"]


@dataclass(frozen=True)
class ProofFiles:
    files: int
    checkpoint_size: int
    cosignatures: int


def proof_file_name(leaf_index: int) -> str:
    return f"{leaf_index}{FILE_SUFFIX}"


def _checkpoint_for(ledger: Ledger, needed: int) -> CosignedCheckpoint:
    """The cosigned checkpoint with the most cosignatures from ``needed`` leaves on, else the
    newest signed one (with whatever cosignatures its size has)."""
    with ledger.store.transaction(commit=False) as session:
        best = cosignatures.best_from(session, needed)
    signed = ledger.tlog.checkpoint(best)  # None: the current tree
    if signed.size < needed:
        raise ValueError(f"the log has {signed.size} leaves; leaf {needed - 1} is not in it")
    with ledger.store.transaction(commit=False) as session:
        return cosignatures.cosigned_checkpoint(session, signed.size, signed.root, signed.note)


def write_tlog_proofs(ledger: Ledger, leaves: Iterable[int], out_dir: Path) -> ProofFiles:
    """Write ``<out_dir>/<leaf index>.tlog-proof`` for each of these leaves."""
    wanted = sorted(set(leaves))
    out_dir.mkdir(parents=True, exist_ok=True)
    if not wanted:
        return ProofFiles(0, 0, 0)
    checkpoint = _checkpoint_for(ledger, wanted[-1] + 1)
    written = 0
    for batch in event_rows(ledger, checkpoint.size, wanted):
        with ledger.store.transaction(commit=False) as session:
            proofs = ledger.tlog.proofs(session, [int(r[0]) for r in batch], checkpoint.size)
        for leaf_index, position, aggregate, version, topic, state in batch:
            entry = LogEntry.from_stored(
                int(position), str(aggregate), int(version), str(topic), bytes(state)
            )
            text = format_tlog_proof(
                int(leaf_index), proofs[int(leaf_index)], checkpoint.note, entry.data()
            )
            (out_dir / proof_file_name(int(leaf_index))).write_text(text, "utf-8")
            written += 1
    return ProofFiles(written, checkpoint.size, checkpoint.cosignatures)


def bundle_leaves(bundle: Path) -> list[int]:
    """The leaf index of every event line of a bundle (what ``export --proofs`` proves)."""
    found: list[int] = []
    with open_bundle(bundle) as handle:
        for line in bundle_lines(handle):
            if isinstance(line, str) and '"event"' in line:
                record = read_line(line)
                if isinstance(record, dict) and record.get("type") == "event":
                    found.append(int(record["leafIndex"]))
    return found
