"""One run's full record as the CLI still reads it: what its events say, plus its projected
evidence and standing, as a JSON-ready dict.

The server's record is composed once, typed, by the service (``api.service.run_record``); this
module (and ``ledger.run_summary``) goes once the CLI calls the service too."""

from __future__ import annotations

from typing import Any

from domain.comparison import comparison_components
from domain.errors import DomainError
from domain.ranking import View, compare
from ledger.application import Ledger
from ledger.history import RunEvents
from ledger.run_summary import run_summary
from projections.queries import run_row, standings, top_of_group
from projections.runner import ProjectionRunner


def ingested_manifests(ledger: Ledger, digest: str) -> dict[str, Any]:
    """A run's manifest set: as ingested, with any manifests attached since. Read from
    those events alone: however many notes anyone appends to a group's #1, the pages that
    compare a run with it read no more."""
    return ledger.run_manifests(digest) or {}


def comparability(a: dict[str, Any], b: dict[str, Any]) -> tuple[bool, str | None]:
    """Whether two manifest sets are in one comparison group, and if not the first part of
    the comparison key that separates them (operation, workload, protocol, environment,
    correctness, metric), or that one of them has no group at all."""
    parts = []
    for manifests in (a, b):
        workload = manifests.get("workload")
        if not isinstance(workload, dict):
            return False, "workload (a run without its workload manifest has no group)"
        try:
            parts.append(comparison_components(manifests["run"], workload, trusted=True))
        except DomainError as exc:
            return False, f"comparison key ({exc.message})"
    first, second = (p.as_json() for p in parts)
    differing = next((k for k in first if first[k] != second[k]), None)
    return differing is None, differing


def compare_runs(ledger: Ledger, a: str, b: str) -> dict[str, Any]:
    """Field-by-field differences of two runs' manifest sets and the ratio a ÷ b, and
    whether the ratio means anything (same comparison group) or what makes it not."""
    left, right = ingested_manifests(ledger, a), ingested_manifests(ledger, b)
    result = compare(left, right)
    comparable, apart = comparability(left, right)
    return {
        "a": a,
        "b": b,
        "comparable": comparable,
        "notComparableBy": apart,
        "ratio": result.ratio,
        "metric": result.a_primary.key,
        "differences": [
            {"path": d.path, "a": d.a, "b": d.b, "inA": d.in_a, "inB": d.in_b}
            for d in result.differences
        ],
    }


def run_record(ledger: Ledger, digest: str, events: RunEvents | None = None) -> dict[str, Any]:
    ProjectionRunner(ledger).catch_up()
    record = run_summary(ledger, digest, events)
    with ledger.store.transaction(commit=False) as session:
        row = run_row(session, digest)
        places = standings(session, digest)
        key = row.comparison_key if row else None
        first = top_of_group(session, key, View.SOURCE_NATIVE) if key else None
    if row is None:
        return record
    record["evidence"] = {
        "level": row.evidence_level,
        "reasons": row.evidence_reasons,
        "causedBy": row.evidence_caused_by,
        "policyVersion": row.policy_version,
    }
    record["comparisonKey"] = key
    record["standings"] = {
        view: {
            "rank": s.rank,
            "of": s.of,
            "value": s.value,
            "tiedWith": s.tied_with,
            "label": s.label,
        }
        for view, s in places.items()
    }
    if first is not None and first != digest:
        record["compareWithFirst"] = compare_runs(ledger, digest, first)
    return record


MAX_COMPARED = 8


def compare_many(ledger: Ledger, digests: list[str]) -> dict[str, Any]:
    """2 to 8 runs side by side: each run's identity and primary value, the ratio of each to
    the first, whether they are all in one comparison group (else the first part of the key
    that separates one of them from the first), and every field that is not the same in all."""
    if not 2 <= len(digests) <= MAX_COMPARED or len(set(digests)) != len(digests):
        raise DomainError(f"compare 2 to {MAX_COMPARED} different runs")
    sets = [ingested_manifests(ledger, d) for d in digests]
    first = sets[0]
    rows = []
    apart: str | None = None
    for digest, manifests in zip(digests, sets, strict=True):
        result = compare(manifests, first)
        ok, why = comparability(manifests, first)
        if not ok and apart is None:
            apart = f"{digest[:19]}… differs in {why}"
        run = manifests.get("run") or {}
        rows.append(
            {
                "run": digest,
                "name": (run.get("metadata") or {}).get("name"),
                "primary": {
                    "metric": result.a_primary.metric,
                    "statistic": result.a_primary.statistic,
                    "unit": result.a_primary.unit,
                    "value": result.a_primary.value,
                },
                "ratioToFirst": result.ratio,
                "comparableWithFirst": ok,
            }
        )
    # A field differs if any run's value is not the first's (None: the run lacks it).
    fields: dict[str, list[Any]] = {}
    differed: dict[str, set[int]] = {}
    for index, manifests in enumerate(sets[1:], start=1):
        for d in compare(first, manifests).differences:
            values = fields.setdefault(d.path, [d.a if d.in_a else None] * len(sets))
            values[index] = d.b if d.in_b else None
            differed.setdefault(d.path, set()).add(index)
    for path, values in fields.items():
        for index in range(1, len(sets)):
            if index not in differed[path]:
                values[index] = values[0]  # agreed with the first run
    return {
        "runs": rows,
        "comparable": apart is None,
        "notComparableBy": apart,
        "differences": [{"path": p, "values": v} for p, v in sorted(fields.items())],
    }
