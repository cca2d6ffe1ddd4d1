"""What the caller of ``verify`` states it trusts and expects, and the verdict it gets.

As in sigstore-python's verifier, the caller states the policy and verification fails closed
against it: with no pinned trust root a bundle only vouches for itself (UNANCHORED, unless
the caller says it accepts that, explicitly); a checkpoint the caller holds that the bundle
does not reach makes it STALE; ``--run``, ``--min-level`` and ``--rank`` state what the bundle
must prove about one run, and it FAILS when it does not; a witness policy (``--policy``, or
the one the pinned trust root names) states which witnesses must have cosigned the bundle's
checkpoint, and it FAILS (``witnessed``) when they have not. Without one the report says the
bundle is unwitnessed: it proves what the log key signed, not that everyone sees that log.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

import msgspec

from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.signing.trust import TrustRoot
from ledger.verification_report import Check, Report

if TYPE_CHECKING:
    from ledger.witness.policy import Policy  # imported where a policy is read or held


class Outcome(StrEnum):
    VERIFIED = "VERIFIED"
    FAILED = "FAILED"  # a check failed: the bundle does not prove what it says
    UNANCHORED = "UNANCHORED"  # nothing pinned: the bundle vouches only for itself
    STALE = "STALE"  # a checkpoint the caller holds is newer than the bundle's


# Exit codes of `kernelindex verify` (2 is the command line's own usage error).
EXIT_CODES: dict[Outcome, int] = {
    Outcome.VERIFIED: 0,
    Outcome.FAILED: 1,
    Outcome.STALE: 3,
    Outcome.UNANCHORED: 4,
}


class Expectation(msgspec.Struct, frozen=True):
    """What the bundle must prove about one run (a digest or a unique prefix of one)."""

    run: str
    min_level: EvidenceLevel | None = None
    rank: int | None = None
    view: View = View.SOURCE_NATIVE


class VerificationPolicy(msgspec.Struct, frozen=True):
    trust_root: TrustRoot | None
    # Accept the bundle's own trust root when none is pinned (the verdict says so).
    allow_unanchored: bool = False
    # Signed checkpoint notes the caller already holds (from a witness, an earlier bundle).
    held_checkpoints: Sequence[str] = msgspec.field(default_factory=tuple)
    expect: Expectation | None = None
    # C2SP tlog-policy: the witnesses whose quorum must have cosigned the checkpoint (None:
    # the pinned trust root's, if it names one; else the bundle is reported unwitnessed).
    witness_policy: Policy | None = None
    # A scoped bundle's heads must be the witnessed tree's (a headsMap line under a checkpoint
    # that met the quorum): without it, heads that are the log key's word alone fail
    # ``heads-map`` (for ledgers with heads leaves on, whose bundles all carry the map).
    require_witnessed_heads: bool = False


def outcome_of(report: Report) -> Outcome:
    """FAILED if any check but the anchor's and freshness failed, or if completeness was
    never shown (fails closed: no path through the verifier may skip it); else UNANCHORED,
    then STALE; VERIFIED only when nothing failed."""
    failed = {Check(c) for c, n in report.failed.items() if n}
    if failed - {Check.ANCHOR, Check.FRESHNESS} or not report.passed[Check.COMPLETE]:
        return Outcome.FAILED
    if Check.ANCHOR in failed:
        return Outcome.UNANCHORED
    if Check.FRESHNESS in failed:
        return Outcome.STALE
    return Outcome.VERIFIED
