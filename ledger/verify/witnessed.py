"""The ``witnessed`` check: the bundle's checkpoint, or a later one that provably extends it,
is cosigned by the quorum of the caller's witness policy (C2SP tlog-policy).

A bundle's log key signature shows what the operator signed; it cannot show that everyone
was shown the same log. Witnesses cosign a checkpoint only after checking that it extends
the last one they cosigned, so a checkpoint the policy's quorum cosigned is one no split
view can contradict unless that many witnesses collude. The bundle carries the cosignatures
on its checkpoint line, or, when a later checkpoint has more, a ``witnessed`` line with
that checkpoint and the consistency proof from the bundle's: every proof against the older
tree then holds in the witnessed one too.

Without a policy the verdict is unchanged, and the report says, in a note and a fact, that
the bundle is unwitnessed: never silently as if it were witnessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from ledger.proofs.errors import ProofError
from ledger.proofs.signed_note import Checkpoint, NoteError, Verifier, open_checkpoint
from ledger.proofs.verify import verify_consistency
from ledger.signing.trust import TrustRoot
from ledger.verification_report import Check, Report

if TYPE_CHECKING:
    # The witness policy module (its parser and quorum rule) is imported where a policy is
    # held: most bundles are verified without one, and ``kernelindex verify`` starts faster.
    from ledger.witness.policy import Policy, QuorumVerdict

__all__ = ["UNWITNESSED", "WitnessPolicySource", "check_witnessed", "policy_of"]

UNWITNESSED = (
    "UNWITNESSED: no witness policy (--policy FILE, or one named by the trust root you pinned): "
    "the bundle proves what this ledger's log key signed, not that anyone else was shown the "
    "same log"
)


class WitnessPolicySource(msgspec.Struct, frozen=True):
    """The policy the bundle is held to, where it came from, or why it could not be read."""

    policy: Policy | None
    source: str  # "--policy", "the trust root", or "" (none)
    error: str | None = None


def policy_of(given: Policy | None, trust_root: TrustRoot | None) -> WitnessPolicySource:
    """The caller's policy, else the one the pinned trust root names, else none."""
    if given is not None:
        return WitnessPolicySource(given, "--policy")
    if trust_root is None or trust_root.witness_policy is None:
        return WitnessPolicySource(None, "")
    from ledger.witness.policy import PolicyError, parse_policy  # noqa: PLC0415 - a policy's

    try:
        return WitnessPolicySource(parse_policy(trust_root.witness_policy), "the trust root")
    except PolicyError as exc:
        return WitnessPolicySource(None, "the trust root", exc.message)


def _later(
    note: str, proof: Sequence[bytes], mine: Checkpoint, verifier: Verifier, report: Report
) -> bool:
    """Whether the witnessed line's checkpoint is the log's, and extends the bundle's."""
    try:
        later, _ = open_checkpoint(note, [verifier], origin=mine.origin)
    except NoteError as exc:
        report.fail(Check.WITNESSED, "witnessed line", f"its checkpoint does not verify: {exc}")
        return False
    try:
        if later.size < mine.size:
            raise ProofError(f"it is of {later.size} leaves, fewer than the bundle's {mine.size}")
        verify_consistency(mine.size, later.size, proof, mine.root, later.root)
    except ProofError as exc:
        report.fail(
            Check.WITNESSED,
            "witnessed line",
            f"the cosigned checkpoint does not extend the bundle's: {exc.message}",
        )
        return False
    return True


def check_witnessed(
    source: WitnessPolicySource,
    mine: Checkpoint,
    mine_note: str,
    later: tuple[str, Sequence[bytes]] | None,
    verifier: Verifier,
    report: Report,
) -> str | None:
    """Hold the bundle's checkpoints to the policy; return the cosigned note that met it
    (what a caller keeps as the checkpoint it holds), else None."""
    # A witnessed line is the log's word that its tree extends the bundle's: held to it
    # whether or not a policy asks about the witnesses.
    notes = [mine_note]
    if later is not None and _later(later[0], later[1], mine, verifier, report):
        notes.append(later[0])
    if source.error is not None:
        report.fail(Check.WITNESSED, source.source, f"the witness policy: {source.error}")
        return None
    policy = source.policy
    if policy is None:
        report.notes.append(UNWITNESSED)
        report.facts["witnessed"] = "no (no witness policy given)"
        return None
    from ledger.witness.policy import quorum_met  # noqa: PLC0415 - a policy is held

    # A policy that names its logs is about those; one that names none, about this log.
    log_keys = [] if policy.logs else [verifier]
    verdicts = [(note, quorum_met(policy, note, log_keys)) for note in notes]
    for note, verdict in verdicts:
        if verdict.met:
            report.ok(Check.WITNESSED)
            report.facts["witnessed"] = _met(verdict, source.source)
            return note
    _, best = max(verdicts, key=lambda pair: len(pair[1].cosigned))
    report.fail(Check.WITNESSED, _where(best), f"{best.reason} ({_policy(source)})")
    report.facts["witnessed"] = "no"
    return None


def _where(verdict: QuorumVerdict) -> str:
    if verdict.checkpoint is None:
        return "checkpoint"
    return f"checkpoint of {verdict.checkpoint.size} leaves"


def _policy(source: WitnessPolicySource) -> str:
    return f"the witness policy from {source.source}"


def _met(verdict: QuorumVerdict, source: str) -> str:
    size = verdict.checkpoint.size if verdict.checkpoint is not None else "?"
    by = ", ".join(verdict.cosigned) or "no witness"
    return f"yes: quorum {verdict.quorum} of {source} met at {size} leaves by {by}"
