"""The checkpoints the caller holds, against the bundle's: one root per tree size (else the
log equivocated), each older one extended by the bundle's (a consistency proof the bundle
carries, else a fork), none newer (else the bundle is STALE)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ledger.proofs.errors import ProofError
from ledger.proofs.signed_note import Checkpoint, NoteError, Verifier, open_checkpoint
from ledger.proofs.verify import verify_consistency
from ledger.verification_report import Check, Report

__all__ = ["check_held_checkpoints"]


def check_held_checkpoints(
    notes: Iterable[str],
    mine: Checkpoint,
    verifier: Verifier,
    consistency: Mapping[int, Sequence[bytes]],
    report: Report,
) -> None:
    """Each held checkpoint ``notes``, signed by the log key, against the bundle's ``mine``;
    ``consistency`` holds the bundle's proofs by the older tree size they start from."""
    for note in notes:
        try:
            held, _ = open_checkpoint(note, [verifier], origin=mine.origin)
        except NoteError as exc:
            report.fail(Check.CHECKPOINT, "held checkpoint", f"does not verify: {exc}")
            continue
        where = f"held checkpoint of {held.size} leaves"
        if held.size == mine.size:
            _check_same_size(where, held, mine, report)
        elif held.size > mine.size:
            report.fail(
                Check.FRESHNESS,
                where,
                f"you hold a checkpoint of {held.size} leaves; the bundle proves the log "
                f"only up to {mine.size}: what it says may have changed since (export "
                "it again, with --checkpoint)",
            )
        else:
            _check_extends(where, held, mine, consistency.get(held.size), report)


def _check_same_size(where: str, held: Checkpoint, mine: Checkpoint, report: Report) -> None:
    if held.root != mine.root:
        report.fail(
            Check.CHECKPOINT,
            where,
            f"two different roots signed for tree size {held.size}: the log equivocated",
        )
    else:
        report.ok(Check.CHECKPOINT)
        report.ok(Check.FRESHNESS)


def _check_extends(
    where: str,
    held: Checkpoint,
    mine: Checkpoint,
    proof: Sequence[bytes] | None,
    report: Report,
) -> None:
    """The bundle's checkpoint extends the older one held, by the proof the bundle carries."""
    if proof is None:
        report.fail(
            Check.CONSISTENCY,
            where,
            "the bundle carries no proof that its log extends the checkpoint you hold "
            "(export it with --checkpoint)",
        )
        return
    try:
        verify_consistency(held.size, mine.size, proof, held.root, mine.root)
    except ProofError as exc:
        report.fail(
            Check.CONSISTENCY,
            where,
            f"the bundle's checkpoint does not extend the one you hold (a fork): {exc}",
        )
    else:
        report.ok(Check.CONSISTENCY)
        report.ok(Check.FRESHNESS)
