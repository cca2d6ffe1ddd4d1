"""Runs compared: two runs' differences (and a run with its group's #1), or 2 to 8 side by side.

A run's manifest set is read from its ingestion and attachments alone
(``Ledger.run_manifests``): however many notes anyone appends to a group's #1, the pages that
compare a run with it read no more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from api.service.models.views import (
    ComparedRun,
    Comparison,
    Difference,
    FieldValues,
    PrimaryValue,
    RunComparison,
)
from domain.comparison import comparison_components
from domain.errors import DomainError
from domain.ranking import FieldDifference, compare

if TYPE_CHECKING:
    from api.service.freshness import Views
    from api.service.runs import Runs
    from ledger.application import Ledger

MAX_COMPARED = 8


def manifests_of(ledger: Ledger, digest: str) -> dict[str, Any]:
    """A run's manifest set: as ingested, with any manifests attached since."""
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


def explained(part: str | None, differences: Sequence[FieldDifference]) -> str | None:
    """The part of the comparison key that separates two runs, with the field of that part's
    manifest that differs (the spec's before the metadata's): "environment
    (spec.hardware.formFactor: runner:B200 ≠ runner:NVIDIA)", so two groups whose manifests
    share a title are told apart where they are compared, not only in the export."""
    if part is None:
        return None
    inside = [d for d in differences if d.path.startswith(f"{part}.")]
    inside.sort(key=lambda d: not d.path.startswith(f"{part}.spec."))
    if not inside:
        return part
    d = inside[0]
    mine = d.a if d.in_a else "absent"
    theirs = d.b if d.in_b else "absent"
    return f"{part} ({d.path[len(part) + 1 :]}: {mine} ≠ {theirs})"


def compare_runs(a: str, left: dict[str, Any], b: str, right: dict[str, Any]) -> RunComparison:
    """Field-by-field differences of two runs' manifest sets and the ratio a ÷ b, and
    whether the ratio means anything (same comparison group) or what makes it not."""
    result = compare(left, right)
    comparable, apart = comparability(left, right)
    return RunComparison(
        a=a,
        b=b,
        comparable=comparable,
        not_comparable_by=apart,
        not_comparable_field=explained(apart, result.differences),
        ratio=result.ratio,
        metric=result.a_primary.key,
        differences=[
            Difference(path=d.path, a=d.a, b=d.b, in_a=d.in_a, in_b=d.in_b)
            for d in result.differences
        ],
    )


def compare_many(digests: list[str], sets: list[dict[str, Any]]) -> Comparison:
    """2 to 8 runs side by side: each run's identity and primary value, the ratio of each to
    the first, whether they are all in one comparison group (else the first part of the key
    that separates one of them from the first), and every field that is not the same in all."""
    if not 2 <= len(digests) <= MAX_COMPARED or len(set(digests)) != len(digests):
        raise DomainError(f"compare 2 to {MAX_COMPARED} different runs")
    first = sets[0]
    rows = []
    apart: str | None = None
    field: str | None = None
    for digest, manifests in zip(digests, sets, strict=True):
        result = compare(manifests, first)
        ok, why = comparability(manifests, first)
        if not ok and apart is None:
            apart = f"{digest[:19]}… differs in {why}"
            field = explained(why, result.differences)
        run = manifests.get("run") or {}
        rows.append(
            ComparedRun(
                run=digest,
                name=(run.get("metadata") or {}).get("name"),
                primary=PrimaryValue(
                    metric=result.a_primary.metric,
                    statistic=result.a_primary.statistic,
                    unit=result.a_primary.unit,
                    value=result.a_primary.value,
                ),
                ratio_to_first=result.ratio,
                comparable_with_first=ok,
            )
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
    return Comparison(
        runs=rows,
        comparable=apart is None,
        not_comparable_by=apart,
        not_comparable_field=field,
        differences=[FieldValues(path=p, values=v) for p, v in sorted(fields.items())],
    )


class Comparisons:
    """Runs named as a person names them (``Runs.resolve``), compared."""

    def __init__(self, views: Views, runs: Runs) -> None:
        self.ledger = views.ledger
        self.runs = runs

    def two(self, a: str, b: str) -> RunComparison:
        """Differences of two runs, a ÷ b."""
        left, right = self.runs.resolve(a), self.runs.resolve(b)
        return compare_runs(
            left, manifests_of(self.ledger, left), right, manifests_of(self.ledger, right)
        )

    def many(self, references: list[str]) -> Comparison:
        """2 to 8 runs side by side."""
        if not 2 <= len(references) <= MAX_COMPARED:  # before resolving any of them
            raise DomainError(f"compare 2 to {MAX_COMPARED} different runs")
        digests = [self.runs.resolve(r) for r in references]
        return compare_many(digests, [manifests_of(self.ledger, d) for d in digests])
