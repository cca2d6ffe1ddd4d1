"""A bundle's lines other than events: their types, the order they must come in, and the
check each one's content gets (header, trust root, checkpoint, consistency proofs, heads,
artifacts, footer). Each function reports to the report it is given and returns what it
read, or None when the line failed; the verifier keeps the state between lines."""

from __future__ import annotations

import hashlib
from typing import Any

from domain.canonical import canonical_b64decode
from ledger.proofs.heads import Heads, HeadsError, open_heads
from ledger.proofs.signed_note import Checkpoint, NoteError, Verifier, open_checkpoint
from ledger.signing.trust import TrustRoot, TrustRootError
from ledger.verification_report import Check, Report
from ledger.verify.events import decode_proof
from ledger.verify.format import BUNDLE_FORMAT
from ledger.verify.policy import VerificationPolicy

__all__ = [
    "LINE_ORDER",
    "anchor_trust_root",
    "check_artifact",
    "check_event_count",
    "check_format",
    "check_scope",
    "open_bundle_checkpoint",
    "open_bundle_heads",
    "read_consistency",
    "read_trust_root",
    "read_witnessed",
    "stage_name",
]

# The order lines must come in; a line of an earlier stage after a later one is refused.
LINE_ORDER: dict[str, int] = {
    "header": 0,
    "trustRoot": 1,
    "checkpoint": 2,
    "witnessed": 3,
    "consistency": 4,
    "heads": 5,
    "headsMap": 6,
    "claim": 7,
    "event": 8,
    "headsLeaf": 8,  # among the events, in leaf order (whole-log bundles)
    "artifact": 9,
    "footer": 10,
}


def stage_name(stage: int) -> str:
    """The line type of a stage of :data:`LINE_ORDER`."""
    return next(k for k, v in LINE_ORDER.items() if v == stage)


def check_format(where: str, record: dict[str, Any], report: Report) -> None:
    """The header names the bundle format this verifier reads."""
    if record.get("format") != BUNDLE_FORMAT:
        report.fail(Check.FORMAT, where, f"format is {record.get('format')!r}, not {BUNDLE_FORMAT}")
    else:
        report.ok(Check.FORMAT)


def read_trust_root(where: str, record: dict[str, Any], report: Report) -> TrustRoot | None:
    """The trust root a trust root line carries, if it is one."""
    try:
        return TrustRoot.from_json(record.get("trustRoot"))
    except TrustRootError as exc:
        report.fail(Check.TRUST_ROOT, where, exc.message)
        return None


def anchor_trust_root(
    where: str, bundled: TrustRoot, policy: VerificationPolicy, report: Report
) -> TrustRoot:
    """Judge the bundle's trust root against the pinned one (``anchor``, ``trust-root``);
    return the trust root the rest of the bundle is checked against: the pinned one, or
    with none pinned the bundle's own (whose verdict is then UNANCHORED unless allowed)."""
    pinned = policy.trust_root
    if pinned is None:
        if policy.allow_unanchored:
            report.notes.append(
                "UNSAFE: trusting the trust root inside the bundle, as asked; the bundle "
                "vouches only for itself"
            )
            report.ok(Check.ANCHOR)
        else:
            report.fail(
                Check.ANCHOR,
                where,
                "no trust root pinned: a bundle made on any ledger with this origin would "
                "pass; pin the ledger's trust root (--trust-root)",
            )
        return bundled
    if bundled.to_json() != pinned.to_json():
        report.fail(Check.TRUST_ROOT, where, "the bundle's trust root is not the one you pinned")
    else:
        report.ok(Check.ANCHOR)
        report.ok(Check.TRUST_ROOT)
    return pinned


def open_bundle_checkpoint(
    where: str, record: dict[str, Any], trust_root: TrustRoot, report: Report
) -> tuple[Checkpoint, Verifier] | None:
    """The checkpoint line's note, verified under the trust root's log key for its origin;
    with the verifier that checks the other notes the log key signed."""
    verifier = Verifier.from_public_key(trust_root.origin, trust_root.log_key.raw)
    try:
        checkpoint, _ = open_checkpoint(
            str(record.get("note", "")), [verifier], origin=trust_root.origin
        )
    except NoteError as exc:
        report.fail(Check.CHECKPOINT, where, f"checkpoint does not verify: {exc}")
        return None
    report.ok(Check.CHECKPOINT)
    return checkpoint, verifier


def read_consistency(
    where: str, record: dict[str, Any], report: Report
) -> tuple[int, list[bytes]] | None:
    """A consistency line: the older tree size it proves the checkpoint extends, and the
    proof (checked against the checkpoints the caller holds, at the end)."""
    try:
        older = record["from"]
        if not isinstance(older, int) or isinstance(older, bool) or older < 0:
            raise ValueError("from must be a tree size")
        proof = decode_proof(record.get("proof"))
    except (KeyError, ValueError) as exc:
        report.fail(Check.FORMAT, where, f"malformed consistency line: {exc}")
        return None
    return older, proof


def read_witnessed(
    where: str, record: dict[str, Any], report: Report
) -> tuple[str, list[bytes]] | None:
    """A witnessed line: a later cosigned checkpoint's note and the consistency proof that
    it extends the bundle's (both checked at the end, against the caller's witness policy)."""
    note = record.get("note")
    try:
        if not isinstance(note, str):
            raise ValueError("note must be a signed checkpoint")
        proof = decode_proof(record.get("proof"))
    except ValueError as exc:
        report.fail(Check.FORMAT, where, f"malformed witnessed line: {exc}")
        return None
    return note, proof


def open_bundle_heads(
    where: str,
    record: dict[str, Any],
    verifier: Verifier,
    checkpoint: Checkpoint,
    report: Report,
) -> Heads | None:
    """The heads line's note, signed by the log key, for the bundle's checkpoint."""
    try:
        heads = open_heads(str(record.get("note", "")), verifier)
    except HeadsError as exc:
        report.fail(Check.HEADS, where, exc.message)
        return None
    if (heads.size, heads.root) != (checkpoint.size, checkpoint.root):
        report.fail(
            Check.HEADS,
            where,
            f"the heads are for a tree of {heads.size} leaves with another root, not the "
            f"bundle's checkpoint of {checkpoint.size}",
        )
        return None
    report.ok(Check.HEADS)
    return heads


def check_scope(scope: dict[str, Any] | None, heads: Heads, report: Report) -> None:
    """The runs the (unsigned) header says the bundle is about are ones its heads cover."""
    named = (scope or {}).get("runs")
    if not isinstance(named, list) or not all(isinstance(r, str) for r in named):
        report.fail(Check.FORMAT, "header", "a scoped bundle's header lists its runs")
        return
    uncovered = sorted(set(named) - set(heads.runs))
    if uncovered:
        report.fail(
            Check.COMPLETE,
            "header",
            f"the header names run {uncovered[0]}, which the heads do not cover",
        )


def check_artifact(where: str, record: dict[str, Any], report: Report) -> str | None:
    """A referenced artifact travels with its bytes: they must hash to its digest. The
    digest, when they do (the bundle then carries that artifact)."""
    digest = str(record.get("digest"))
    try:
        content = canonical_b64decode(record.get("content", ""), "artifact content")
    except ValueError:
        report.fail(Check.ARTIFACT, where, f"artifact {digest} content is not base64")
        return None
    if "sha256:" + hashlib.sha256(content).hexdigest() != digest:
        report.fail(Check.ARTIFACT, where, f"artifact {digest}: content hashes differently")
        return None
    report.ok(Check.ARTIFACT)
    return digest


def check_event_count(where: str, record: dict[str, Any], events: int, report: Report) -> None:
    """The footer counts the bundle's events: fewer lines than it says is a truncation."""
    said = record.get("events")
    if type(said) is not int or said != events:  # 5.0 and true are not the count 5 and 1
        report.fail(
            Check.FORMAT,
            where,
            f"footer says {said!r} events, the bundle has {events}",
        )
    else:
        report.ok(Check.FORMAT)
