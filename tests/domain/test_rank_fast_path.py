"""``rank_group``'s fast path (a run alone in its rank is tied with nobody) gives the plain
computation's ranks, for any group and view (hypothesis): the reference is ``rank_group`` as
it was before (f9cc555), every block handled alike."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.ranking import (
    RankedEntry,
    RankEntry,
    View,
    _blocks_by_equal_value,
    _blocks_by_overlap,
    _check_group,
    _value,
    rank_group,
)
from tests.domain.test_ranking import groups  # the ranking tests' groups of entries


def reference_rank_group(entries: list[RankEntry], view: View) -> list[RankedEntry]:
    group = list(entries)
    _check_group(group)
    ranked = [entry for entry in group if entry.ranked_in(view)]
    if view is View.SOURCE_NATIVE:
        blocks = _blocks_by_equal_value(ranked)
    else:
        blocks = _blocks_by_overlap(ranked)
    result: list[RankedEntry] = []
    for rank, block in enumerate(blocks, start=1):
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


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups(), st.sampled_from(list(View)))
def test_rank_group_is_the_plain_computation(entries: list[RankEntry], view: View) -> None:
    assert rank_group(entries, view) == reference_rank_group(entries, view)
    assert rank_group(entries, str(view)) == reference_rank_group(entries, view)
