"""Offline verification of a bundle, against a policy the caller states: one small door.

``verify_bundle_lines(lines, VerificationPolicy(trust_root=...))`` returns the report of
every named check; ``outcome_of(report)`` is the verdict (VERIFIED, FAILED, STALE or
UNANCHORED) and ``EXIT_CODES`` its exit code. Imports no database code.
"""

from ledger.verify.bundle import BundleVerifier, verify_bundle_lines
from ledger.verify.format import BUNDLE_FORMAT, OverlongLine, bundle_lines, open_bundle
from ledger.verify.policy import (
    EXIT_CODES,
    Expectation,
    Outcome,
    VerificationPolicy,
    outcome_of,
)
from ledger.verify.pool import default_workers
from ledger.verify.runs import RunTracker, make_claim

__all__ = [
    "BUNDLE_FORMAT",
    "EXIT_CODES",
    "BundleVerifier",
    "Expectation",
    "Outcome",
    "OverlongLine",
    "RunTracker",
    "VerificationPolicy",
    "bundle_lines",
    "default_workers",
    "make_claim",
    "open_bundle",
    "outcome_of",
    "verify_bundle_lines",
]
