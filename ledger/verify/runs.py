"""Runs recomputed from a bundle's events: the claims it makes, the groups its heads name,
and what the caller expects of one run.

A claim states a run's evidence level and its rank in each view of its comparison group, as
the ledger's projections have them. The verifier refolds the bundle's events with the same
domain code (``RunFold``, ``rank_group``) and compares — against a *complete* set of events:
the heads (``ledger.proofs.heads``) say how many events each run has and who each group's members
are, and the completeness checks hold the bundle to them, so a claim cannot be made true by
leaving out the event or the rival that contradicts it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from domain.errors import DomainError
from domain.event_names import EventName
from domain.evidence import POLICY_VERSION
from domain.ranking import RankedEntry, View, rank_group
from domain.rerun_binding import DeviceClass
from domain.run_facts import RunFold
from ledger.authority.job_code import check_job_code
from ledger.proofs.heads import GroupHead, Heads, members_digest
from ledger.verification_report import Check, Report
from ledger.verify.policy import Expectation

MIN_PREFIX = 8  # hex digits of a run digest --run must give


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


_CLAIM_FIELDS = {"type", "run", "comparisonKey", "evidence", "standings"}
_VIEWS = {str(v) for v in View}


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_shape(claim: Mapping[str, Any]) -> None:
    """A claim says exactly what can be recomputed, and nothing else: a field the verifier
    did not check must not be there for a reader to take as checked."""
    if set(claim) != _CLAIM_FIELDS:
        raise ClaimFormatError(f"a claim has exactly the fields {sorted(_CLAIM_FIELDS)}")
    if not isinstance(claim["run"], str):
        raise ClaimFormatError("a claim names its run by digest (a string)")
    key = claim["comparisonKey"]
    if key is not None and not isinstance(key, str):
        raise ClaimFormatError("a claim's comparisonKey is a string or null")
    evidence = claim["evidence"]
    if (
        not isinstance(evidence, Mapping)
        or set(evidence) != {"level", "policyVersion"}
        or not all(isinstance(v, str) for v in evidence.values())
    ):
        raise ClaimFormatError("a claim's evidence is {level, policyVersion}, both strings")
    standings = claim["standings"]
    if not isinstance(standings, Mapping) or not set(standings) <= _VIEWS:
        raise ClaimFormatError(f"a claim's standings map views ({sorted(_VIEWS)}) to ranks")
    for value in standings.values():
        if value is not None and (
            not isinstance(value, Mapping)
            or set(value) != {"rank", "of"}
            or not (_count(value["rank"]) and _count(value["of"]))
        ):
            raise ClaimFormatError("a standing is {rank, of}, whole numbers from 1, or null")


class RunTracker:
    """Folds the bundle's run events (those whose checks all held), in leaf order.

    ``devices_of``: a key's registered device classes, from the bundle's key events: a rerun
    counts only on a measuring class of its signer's key (never what the result declares)."""

    def __init__(self, devices_of: Callable[[str], frozenset[DeviceClass]] | None = None) -> None:
        self.devices_of = devices_of or (lambda _: frozenset())
        self.claims: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, RunFold] = {}
        # Each group's members and rankings, made once for all its claims (once per claim,
        # checking a whole group's claims cost its size squared); forgotten on every fold.
        self._members: dict[str | None, list[str]] | None = None
        self._rankings: dict[tuple[str, View], dict[str, RankedEntry]] = {}

    def expect(self, claim: Mapping[str, Any]) -> None:
        """Remember a claim to check once the events are folded; raise ClaimFormatError if
        it is not shaped like one (a malformed claim is a failed claim, never a crash)."""
        _check_shape(claim)
        run = str(claim.get("run"))
        if run in self.claims:
            raise ClaimFormatError(f"a second claim for run {run}")
        self.claims[run] = dict(claim)

    def observe(
        self, event: str, position: int, signer: str, run_digest: str, predicate: Mapping[str, Any]
    ) -> None:
        self._members, self._rankings = None, {}
        if event == EventName.RUN_INGESTED:
            if run_digest in self.runs:
                raise DomainError(f"run {run_digest} is ingested twice in the bundle")
            fold = RunFold.ingested(position, run_digest, predicate)
            fold.devices_of = self.devices_of
            self.runs[run_digest] = fold
        elif run_digest in self.runs:
            self.runs[run_digest].apply(event, position, signer, predicate)

    # ------------------------------------------------------------------ recomputing

    def members(self, key: str) -> list[str]:
        if self._members is None:
            groups: dict[str | None, list[str]] = {}
            for digest in sorted(self.runs):
                groups.setdefault(self.runs[digest].profile.comparison_key, []).append(digest)
            self._members = groups
        return list(self._members.get(key, []))

    def standing(self, run: str, view: View) -> RankedEntry | None:
        key = self.runs[run].profile.comparison_key
        if key is None:  # no comparison group: ranked nowhere, as the projections have it
            return None
        ranking = self._rankings.get((key, view))
        if ranking is None:
            group = [self.runs[d].rank_entry() for d in self.members(key)]
            ranking = self._rankings[(key, view)] = {r.run: r for r in rank_group(group, view)}
        return ranking.get(run)

    def _group_proven(self, key: str, heads: Heads | None) -> bool:
        """Every member is in the bundle: a whole-log bundle holds every run; a scoped one
        only the groups its heads name (and the group check holds it to them)."""
        return heads is None or key in heads.groups

    # ------------------------------------------------------------------ checks

    def check_measured_code(
        self,
        report: Report,
        carried: Callable[[str], bool],
        workload: Callable[[str], bytes | None],
    ) -> None:
        """Each rerun that moved a run's level measured the run's own code, and the bundle
        carries it (``check_job_code``, as admission held it to the ledger's store): a result
        for a job whose artifacts nobody can fetch shows nothing about the run. The fold
        checked the digests; here the carried workload's bytes must rebuild the run's workload
        digest too (a request an older ledger admitted without that check fails here)."""
        for run, fold in sorted(self.runs.items()):
            manifests = fold.ingestion["manifests"]
            for position, (solution, workload_digest) in sorted(fold.measured.items()):
                try:
                    check_job_code(
                        manifests,
                        solution,
                        workload_digest,
                        carried,
                        workload,
                        held_by="the bundle",
                    )
                except DomainError as exc:
                    report.fail(
                        Check.ARTIFACT, f"rerun at position {position} of {run}", exc.message
                    )
                else:
                    report.ok(Check.ARTIFACT)

    def check_groups(self, report: Report, heads: Heads | None) -> None:
        """Each group the heads name has exactly the members the log says it had."""
        for key, head in sorted((heads.groups if heads else {}).items()):
            found = self.members(key)
            if GroupHead(len(found), members_digest(found)) == head:
                report.ok(Check.GROUP)
            elif len(found) != head.members:
                missing = "a member left out" if len(found) < head.members else "runs added"
                report.fail(
                    Check.GROUP,
                    f"group {key}",
                    f"the log's heads say it had {head.members} members at this checkpoint; "
                    f"the bundle's events give {len(found)} ({missing})",
                )
            else:
                report.fail(
                    Check.GROUP,
                    f"group {key}",
                    "the bundle's members are not the ones the log's heads name",
                )

    def check_claims(self, report: Report, heads: Heads | None) -> None:
        for run, claim in sorted(self.claims.items()):
            where = f"claim for {run}"
            fold = self.runs.get(run)
            if heads is not None and run not in heads.runs:
                report.fail(Check.COMPLETE, where, "the heads do not cover the claimed run")
            if fold is None:
                report.fail(Check.CLAIM, where, "the bundle holds no ingestion for the claimed run")
                continue
            level = fold.evidence.level.label
            claimed_level = claim["evidence"]["level"]
            claimed_policy = claim["evidence"]["policyVersion"]
            if claimed_policy != POLICY_VERSION:
                report.fail(
                    Check.CLAIM,
                    where,
                    f"claims a level under policy {claimed_policy!r}; this verifier "
                    f"recomputes {POLICY_VERSION!r}",
                )
            elif claimed_level != level:
                report.fail(
                    Check.CLAIM,
                    where,
                    f"claims evidence level {claimed_level!r}; its events give {level!r}",
                )
            else:
                report.ok(Check.CLAIM)
            self._check_standings(report, where, run, claim, heads)

    def _check_standings(
        self, report: Report, where: str, run: str, claim: Mapping[str, Any], heads: Heads | None
    ) -> None:
        key = self.runs[run].profile.comparison_key
        if claim.get("comparisonKey") != key:
            report.fail(
                Check.CLAIM,
                where,
                f"claims comparison group {claim.get('comparisonKey')}; events give {key}",
            )
            return
        if key is not None and not self._group_proven(key, heads):
            report.fail(
                Check.GROUP,
                where,
                f"claims a rank in group {key}, but the heads do not prove who its members are",
            )
            return
        claimed = claim.get("standings") or {}
        for view in View:
            computed = self.standing(run, view)
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

    def check_expectation(
        self, report: Report, expectation: Expectation, heads: Heads | None
    ) -> None:
        """What the caller asked the bundle to prove about one run."""
        where = f"--run {expectation.run}"
        wanted = expectation.run.strip().lower()
        wanted = wanted if wanted.startswith("sha256:") else "sha256:" + wanted
        if len(wanted) < len("sha256:") + MIN_PREFIX:
            # As everywhere else: a prefix short enough to match another run by chance
            # would let a bundle about that run answer for this one.
            report.fail(Check.EXPECTATION, where, f"give at least {MIN_PREFIX} hex digits")
            return
        found = sorted(d for d in self.runs if d.startswith(wanted))
        if len(found) != 1:
            why = "holds no such run" if not found else f"holds {len(found)} runs by that prefix"
            report.fail(Check.EXPECTATION, where, f"the bundle {why}")
            return
        (run,) = found
        fold = self.runs[run]
        if heads is not None and run not in heads.runs:
            report.fail(Check.EXPECTATION, where, "the heads do not prove the run complete")
            return
        report.ok(Check.EXPECTATION)
        level = fold.evidence.level
        if expectation.min_level is not None:
            if level >= expectation.min_level:
                report.ok(Check.EXPECTATION)
            else:
                report.fail(
                    Check.EXPECTATION,
                    where,
                    f"its events give evidence level {level.label}, below the "
                    f"{expectation.min_level.label} you asked for",
                )
        if expectation.rank is not None:
            key = fold.profile.comparison_key
            standing = self.standing(run, expectation.view)
            if key is None or not self._group_proven(key, heads):
                report.fail(
                    Check.EXPECTATION,
                    where,
                    "the bundle does not prove the members of its comparison group, "
                    "so no rank can be shown",
                )
            elif standing is None or standing.rank != expectation.rank:
                got = f"rank {standing.rank} of {standing.of}" if standing else "not ranked"
                report.fail(
                    Check.EXPECTATION,
                    where,
                    f"its events give {got} in the {expectation.view} view, "
                    f"not the rank {expectation.rank} you asked for",
                )
            else:
                report.ok(Check.EXPECTATION)
        report.facts["run"] = {
            "digest": run,
            "evidenceLevel": level.label,
            "standings": {
                str(v): ({"rank": s.rank, "of": s.of} if (s := self.standing(run, v)) else None)
                for v in View
            },
        }
