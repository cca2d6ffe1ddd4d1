"""Claims a bundle makes about runs, and recomputing them from the bundle's own events.

A claim states a run's evidence level and its rank in each view of its comparison group, as
the ledger's projections have them. The verifier refolds the same events with the same
domain code (``RunFold``, ``rank_group``) and compares. Claims come before the events in a
bundle, so the verifier keeps state only for the claimed runs and their group members.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.errors import DomainError
from domain.ranking import View, rank_group
from domain.run_facts import RunFold
from ledger.verification_report import Check, Report


def make_claim(
    run_digest: str, row: Mapping[str, Any], standings: Mapping[str, Any]
) -> dict[str, Any]:
    """A claim line from a projected run row and its standings."""
    return {
        "type": "claim",
        "run": run_digest,
        "comparisonKey": row["comparison_key"],
        "evidence": {"level": row["evidence_level"], "policyVersion": row["policy_version"]},
        "standings": {view: {"rank": s.rank, "of": s.of} for view, s in standings.items()},
    }


class ClaimFormatError(DomainError):
    code = "malformed-claim"


def _check_shape(claim: Mapping[str, Any]) -> None:
    if not isinstance(claim.get("run"), str):
        raise ClaimFormatError("a claim names its run by digest (a string)")
    key = claim.get("comparisonKey")
    if key is not None and not isinstance(key, str):
        raise ClaimFormatError("a claim's comparisonKey is a string or null")
    if not isinstance(claim.get("evidence"), Mapping):
        raise ClaimFormatError("a claim's evidence is an object")
    standings = claim.get("standings")
    if not isinstance(standings, Mapping) or not all(
        value is None or isinstance(value, Mapping) for value in standings.values()
    ):
        raise ClaimFormatError("a claim's standings map each view to an object or null")


class ClaimTracker:
    def __init__(self) -> None:
        self.claims: dict[str, dict[str, Any]] = {}
        self.groups: set[str] = set()
        self.runs: dict[str, RunFold] = {}

    def expect(self, claim: Mapping[str, Any]) -> None:
        """Remember a claim to check once the events are folded; raise ClaimFormatError if
        it is not shaped like one (a malformed claim is a failed claim, never a crash)."""
        _check_shape(claim)
        run = str(claim.get("run"))
        self.claims[run] = dict(claim)
        key = claim.get("comparisonKey")
        if isinstance(key, str):
            self.groups.add(key)

    def observe(
        self, event: str, position: int, signer: str, run_digest: str, predicate: Mapping[str, Any]
    ) -> None:
        """Fold a verified run event, if it concerns a claimed run or one of their groups."""
        if event == "Run.Ingested":
            fold = RunFold.ingested(position, run_digest, predicate)
            if run_digest in self.claims or fold.profile.comparison_key in self.groups:
                self.runs[run_digest] = fold
        elif run_digest in self.runs:
            self.runs[run_digest].apply(event, position, signer, predicate)

    def check(self, report: Report) -> None:
        for run, claim in sorted(self.claims.items()):
            where = f"claim for {run}"
            fold = self.runs.get(run)
            if fold is None:
                report.fail(Check.CLAIM, where, "the bundle holds no ingestion for the claimed run")
                continue
            level = fold.evidence.level.label
            claimed_level = (claim.get("evidence") or {}).get("level")
            if claimed_level != level:
                report.fail(
                    Check.CLAIM,
                    where,
                    f"claims evidence level {claimed_level!r}; its events give {level!r}",
                )
            else:
                report.ok(Check.CLAIM)
            self._check_standings(report, where, fold, claim)

    def _check_standings(
        self, report: Report, where: str, fold: RunFold, claim: Mapping[str, Any]
    ) -> None:
        key = fold.profile.comparison_key
        if claim.get("comparisonKey") != key:
            report.fail(
                Check.CLAIM,
                where,
                f"claims comparison group {claim.get('comparisonKey')}; events give {key}",
            )
            return
        claimed = claim.get("standings") or {}
        group = [f.rank_entry() for f in self.runs.values() if f.profile.comparison_key == key]
        for view in View:
            computed = next(
                (r for r in rank_group(group, view) if r.run == fold.profile.run_digest), None
            )
            stated = claimed.get(str(view))
            actual = None if computed is None else {"rank": computed.rank, "of": computed.of}
            if stated != actual:
                report.fail(
                    Check.CLAIM,
                    where,
                    f"claims {view} standing {stated}; the bundle's events give {actual}",
                )
            else:
                report.ok(Check.CLAIM)
