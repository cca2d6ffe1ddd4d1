"""Ranks within a comparison group, and "Compare with #1" (docs/design.md §8).

Eligibility (both views): source status ``passed``, not retracted, not superseded.

**source-native view** — every eligible run that states a claimed primary value, ranked
ascending by that value (lower latency or score is better) with *dense* ranks: equal values
share a rank and the next distinct value gets the next integer (1, 1, 2, 3…).

**verified view** — eligible runs at evidence level ``verified`` or above that carry a rerun
median and 95 % interval, ranked ascending by the rerun median; runs *tie when their bootstrap
95 % intervals overlap*. Overlap is not transitive, so ties are made deterministic like this:

1. Each run's interval is taken as closed, ``[low, high]``, widened if need be to contain its
   own median (``[min(low, median), max(high, median)]``). Touching intervals overlap.
2. Runs are sorted by ``(median, run digest)``. Walking that order, a run joins the current
   tie block when its ``low`` is ≤ the largest ``high`` seen in the block; otherwise it starts
   a new block. Block *k* (from 1) has dense rank *k*.

Because every interval contains its median, this walk yields exactly the connected
components of the "intervals overlap" graph: two runs share a rank iff a chain of pairwise
overlapping intervals joins them. So a run can tie with one whose interval it does not
itself overlap (A overlaps B, B overlaps C ⇒ A, B, C tie). The blocks depend only on the set
of entries, never on input order.

In both views ``of`` is the number of ranked runs, ``tied_with`` the run digests sharing the
rank (sorted), and display order is ``(rank, value, run digest)`` — the digest only orders
runs for display, it never separates a tie.

The seeded bootstrap (:func:`bootstrap_ci95`) is the percentile bootstrap of the median, pure
Python and reproducible for a seed: the same samples, seed and resample count give the same
interval on every machine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any

import msgspec

from domain.comparison import PrimaryMeasurement, readable_primary
from domain.errors import DomainError
from domain.evidence import EvidenceLevel
from domain.quantities import finite

RANKING_POLICY_VERSION = "ranking-v1"
DEFAULT_RESAMPLES = 2000
PASSED = "passed"


class RankingError(DomainError):
    code = "invalid-ranking-input"


class View(StrEnum):
    SOURCE_NATIVE = "source-native"
    VERIFIED = "verified"


class RankEntry(msgspec.Struct, frozen=True):
    """What ranking needs to know about one run of a comparison group.

    ``claimed``: the source's primary value (``None`` when the run states none).
    ``rerun_median_ns`` / ``rerun_ci95_ns``: the verified value and its bootstrap interval
    (see :func:`verified_value`), ``None`` until a rerun verified the run.
    """

    run: str
    comparison_key: str
    status: str
    claimed: float | None
    level: EvidenceLevel = EvidenceLevel.REPORTED
    retracted: bool = False
    superseded: bool = False
    rerun_median_ns: float | None = None
    rerun_ci95_ns: tuple[float, float] | None = None

    @property
    def eligible(self) -> bool:
        """Status passed, not retracted, not superseded."""
        return self.status == PASSED and not self.retracted and not self.superseded

    def ranked_in(self, view: View) -> bool:
        return self.why_unranked(view) is None

    def why_unranked(self, view: View) -> str | None:
        """Why the run has no rank in ``view`` (None: it is ranked), in the policy's order:
        the one statement of eligibility that ranks and explanations both use."""
        if not self.comparison_key:
            return "it has no comparison group"
        if self.retracted:
            return "it was retracted"
        if self.superseded:
            return "it is superseded"
        if self.status != PASSED:
            return f"the source marked it {self.status or 'unknown'}, not passed"
        if view is View.SOURCE_NATIVE:
            return None if finite(self.claimed) else "it states no primary value"
        if self.level < EvidenceLevel.VERIFIED:
            return "no KernelIndex-controlled rerun has verified it"
        verified = (
            finite(self.rerun_median_ns)
            and self.rerun_ci95_ns is not None
            and all(finite(bound) for bound in self.rerun_ci95_ns)
        )
        return None if verified else "its verifying reruns give no value"


class RankedEntry(msgspec.Struct, frozen=True):
    run: str
    rank: int
    of: int
    value: float
    tied_with: tuple[str, ...]
    view: View = View.SOURCE_NATIVE
    policy_version: str = RANKING_POLICY_VERSION

    @property
    def label(self) -> str:
        """``Rank 9 of 14 in its comparison group · source-native comparison``."""
        return f"Rank {self.rank} of {self.of} in its comparison group · {self.view} comparison"


def _check_group(entries: Sequence[RankEntry]) -> None:
    keys = {entry.comparison_key for entry in entries}
    if len(keys) > 1:
        raise RankingError(f"entries from {len(keys)} comparison groups cannot be ranked together")
    runs = [entry.run for entry in entries]
    if len(set(runs)) != len(runs):
        raise RankingError("a run appears twice in the group")


def _blocks_by_equal_value(ranked: list[RankEntry]) -> list[list[RankEntry]]:
    ordered = sorted(ranked, key=lambda e: (e.claimed, e.run))
    blocks: list[list[RankEntry]] = []
    for entry in ordered:
        if blocks and blocks[-1][0].claimed == entry.claimed:
            blocks[-1].append(entry)
        else:
            blocks.append([entry])
    return blocks


def _interval(entry: RankEntry) -> tuple[float, float]:
    assert entry.rerun_median_ns is not None and entry.rerun_ci95_ns is not None
    low, high = entry.rerun_ci95_ns
    return min(low, high, entry.rerun_median_ns), max(low, high, entry.rerun_median_ns)


def _blocks_by_overlap(ranked: list[RankEntry]) -> list[list[RankEntry]]:
    """Connected components of the interval-overlap graph, left to right.

    Sweeping in order of the intervals' low ends (not their medians: a wide interval with a
    late median can bridge two earlier ones) merges every chain of overlaps; the resulting
    blocks cover disjoint stretches of the line, so their order is also their medians' order.
    """
    ordered = sorted(ranked, key=lambda e: (_interval(e)[0], e.rerun_median_ns, e.run))
    blocks: list[list[RankEntry]] = []
    reach = -math.inf
    for entry in ordered:
        low, high = _interval(entry)
        if blocks and low <= reach:
            blocks[-1].append(entry)
            reach = max(reach, high)
        else:
            blocks.append([entry])
            reach = high
    return [sorted(block, key=lambda e: (e.rerun_median_ns, e.run)) for block in blocks]


def rank_group(entries: Iterable[RankEntry], view: View | str) -> list[RankedEntry]:
    """Dense ranks of one comparison group in ``view``, in display order.

    Entries that are not ranked in the view (ineligible, no value, below ``verified`` for
    the verified view) are left out. The result is a function of the *set* of entries.
    """
    view = View(view)
    group = list(entries)
    _check_group(group)
    ranked = [entry for entry in group if entry.why_unranked(view) is None]
    if view is View.SOURCE_NATIVE:
        blocks = _blocks_by_equal_value(ranked)
    else:
        blocks = _blocks_by_overlap(ranked)
    result: list[RankedEntry] = []
    of = len(ranked)
    for rank, block in enumerate(blocks, start=1):
        if len(block) == 1:  # a rank of its own: tied with nobody (most runs)
            alone = block[0]
            result.append(RankedEntry(alone.run, rank, of, _value(alone, view), (), view))
            continue
        runs = tuple(sorted(entry.run for entry in block))
        members = sorted(block, key=lambda e: (_value(e, view), e.run))
        for entry in members:
            result.append(
                RankedEntry(
                    run=entry.run,
                    rank=rank,
                    of=len(ranked),
                    value=_value(entry, view),
                    tied_with=tuple(run for run in runs if run != entry.run),
                    view=view,
                )
            )
    return result


def _value(entry: RankEntry, view: View) -> float:
    value = entry.claimed if view is View.SOURCE_NATIVE else entry.rerun_median_ns
    assert value is not None
    return value


# --- bootstrap ------------------------------------------------------------------------------------


def bootstrap_ci95(
    samples: Sequence[float], seed: int, resamples: int = DEFAULT_RESAMPLES
) -> tuple[float, float]:
    """Percentile-bootstrap 95 % interval of the median of ``samples``.

    ``resamples`` times, draw ``len(samples)`` values with replacement using
    ``random.Random(seed).choices`` and take their median; sort those medians ``m[0..R-1]``
    and return ``(m[k], m[R-1-k])`` with ``k = floor(0.025 × R)``. Deterministic for a seed.
    """
    values = [float(v) for v in samples]
    if not values:
        raise RankingError("the bootstrap needs at least one sample")
    if not all(math.isfinite(v) for v in values):
        raise RankingError("samples must be finite numbers")
    if resamples < 1:
        raise RankingError("resamples must be at least 1")
    # Imported here: only a run with verifying reruns is bootstrapped, and the offline
    # verifier of a bundle without any would import it for nothing (start-up, issue 33).
    import statistics  # noqa: PLC0415

    rng = random.Random(seed)  # noqa: S311 -- reproducibility, not secrecy
    n = len(values)
    medians = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(resamples))
    k = math.floor(0.025 * resamples)
    return medians[k], medians[resamples - 1 - k]


def seed_for(run_digest: str) -> int:
    """A bootstrap seed derived from a run digest: the first 64 bits of its hex."""
    hexpart = run_digest.removeprefix("sha256:")
    try:
        return int(hexpart[:16], 16)
    except ValueError:
        raise RankingError(f"{run_digest!r} is not a sha256 digest") from None


def verified_value(
    samples: Sequence[float], run_digest: str, resamples: int = DEFAULT_RESAMPLES
) -> tuple[float, tuple[float, float]]:
    """``(median, (low, high))`` of the pooled latency samples (ns) of a run's verifying
    reruns, with the bootstrap seeded by the run digest — a pure function of the events."""
    if not samples:
        raise RankingError("no samples")
    import statistics  # noqa: PLC0415 - see bootstrap_ci95

    return float(statistics.median(samples)), bootstrap_ci95(
        samples, seed_for(run_digest), resamples
    )


# --- compare with #1 ------------------------------------------------------------------------------


class FieldDifference(msgspec.Struct, frozen=True):
    """One leaf that differs; ``in_a``/``in_b`` say whether the field exists on each side."""

    path: str
    a: Any
    b: Any
    in_a: bool = True
    in_b: bool = True


class Comparison(msgspec.Struct, frozen=True):
    differences: tuple[FieldDifference, ...]
    a_primary: PrimaryMeasurement
    b_primary: PrimaryMeasurement
    ratio: float | None  # a's primary value ÷ b's; None when not comparable

    @property
    def comparable(self) -> bool:
        return self.ratio is not None


def _flatten(value: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping) and value:
        for key in value:
            _flatten(value[key], f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            _flatten(item, f"{path}[{index}]", out)
    else:
        out[path] = value


def _run_of(document: Mapping[str, Any]) -> Mapping[str, Any]:
    run = document.get("run") if document.get("kind") is None else document
    if not isinstance(run, Mapping):
        raise RankingError("expected a BenchmarkRun manifest or a manifest set with a run")
    return run


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> Comparison:
    """Field-by-field differences between two runs and the ratio of their primary values.

    ``a`` and ``b`` are BenchmarkRun manifests, or manifest sets ``{run, protocol,
    environment, …}`` (then paths start with ``run.``, ``protocol.`` …). Leaves are compared
    with JSON equality (``1 == 1.0``); a field present on one side only is a difference.
    Paths come sorted. ``ratio = a / b`` (so comparing a run ``a`` with the group's #1 ``b``
    gives ≥ 1 when ``a`` is slower) and is ``None`` unless both primary measurements have the
    same metric, statistic and unit and ``b``'s value is non-zero.
    """
    flat_a: dict[str, Any] = {}
    flat_b: dict[str, Any] = {}
    _flatten(a, "", flat_a)
    _flatten(b, "", flat_b)
    differences = []
    for path in sorted(flat_a.keys() | flat_b.keys()):
        in_a, in_b = path in flat_a, path in flat_b
        va, vb = flat_a.get(path), flat_b.get(path)
        same = in_a and in_b and type(va) is not bool and type(vb) is not bool and va == vb
        same = same or (in_a and in_b and type(va) is type(vb) and va == vb)
        if not same:
            differences.append(FieldDifference(path, va, vb, in_a, in_b))
    pa, pb = readable_primary(_run_of(a)), readable_primary(_run_of(b))
    ratio = None
    if pa.key == pb.key and pa.value is not None and pb.value is not None and pb.value != 0:
        ratio = pa.value / pb.value
    return Comparison(tuple(differences), pa, pb, ratio)
