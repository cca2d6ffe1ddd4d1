"""Leaderboards as a terminal shows them (api.display.board_table) and the orders a board is
read in (api.service.board_orders): pure, on small boards."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from api.display import board_table
from api.service.board_orders import Order, best_per_user, ordered, placed
from api.service.compare import explained
from api.service.models.views import BoardEntry, BoardGroup, Leaderboard
from domain.ranking import FieldDifference

LONG = "kernelbot-505727-leaderboard-with-a-very-long-name"


def _entry(rank: int, value: float, name: str, author: str | None, sol: float | None) -> BoardEntry:
    return BoardEntry(
        rank=rank,
        of=9,
        run=f"sha256:{rank:064x}",
        name=name,
        title=None,
        source="s",
        external_id=None,
        evidence_level="reported",
        value=value,
        unit="ns",
        metric="latency",
        statistic="mean",
        claimed=value,
        rerun_median_ns=None,
        author=author,
        tied_with=[],
        ratio_to_first=value / 100.0,
        place=rank,
        sol_score=sol,
        runs_of_author=None,
        gap_to_next=None,
    )


def _board(entries: list[BoardEntry], *, sol: bool = False, per_user: bool = False) -> Leaderboard:
    group = BoardGroup(
        benchmark="b",
        gpu="NVIDIA B200",
        source="sol-execbench" if sol else "gpumode-kernelbot",
        parts={},
        apart_by=None,
        sweep_workloads=1,
        description=None,
        has_sol_score=sol,
        has_authors=True,
    )
    return Leaderboard(
        comparison_key="sha256:" + "a" * 64,
        view="source-native",
        min_level=None,
        order="rank",
        per_user=per_user,
        total=len(entries),
        start=1,
        next=None,
        group=group,
        entries=entries,
    )


ENTRIES = [
    _entry(1, 100.0, LONG, "ann", 0.5),
    _entry(2, 110.0, "b-run", "bob", 0.9),
    _entry(3, 120.0, "c-run", "ann", None),
    _entry(4, 150.0, "d-run", None, 0.7),
]


def test_at_80_columns_a_run_is_one_line_cut_with_an_ellipsis() -> None:
    lines = board_table(_board(ENTRIES, sol=True), 80)
    assert len(lines) == 1 + len(ENTRIES)  # a header and one line a run: nothing wraps
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].split()[:4] == ["rank", "run", "evidence", "value"]
    assert "SOL" in lines[0]
    assert "…" in lines[1] and LONG[:10] in lines[1]
    assert "0.9000" in lines[2]


def test_narrow_terminals_drop_the_bar_then_the_evidence_then_the_ratio() -> None:
    wide = board_table(_board(ENTRIES), 120)[0]
    assert "latency" in wide and "evidence" in wide
    narrow = board_table(_board(ENTRIES), 44)
    assert "latency" not in narrow[0] and "evidence" not in narrow[0]
    assert all(len(line) <= 44 for line in narrow)
    assert "b-run" in narrow[2]


@given(
    st.integers(min_value=30, max_value=200),
    st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=6),
)
def test_no_line_is_wider_than_the_terminal(width: int, names: list[str]) -> None:
    entries = [
        _entry(i + 1, 100.0 + i, n.replace("\n", " "), None, None) for i, n in enumerate(names)
    ]
    lines = board_table(_board(entries), width)
    assert len(lines) == len(entries) + 1
    assert all(len(line) <= max(width, 16) for line in lines)


def test_sol_score_order_is_the_sources_and_keeps_the_ledgers_ranks() -> None:
    shown = placed(ordered(ENTRIES, Order.SOL_SCORE), 1)
    assert [e.sol_score for e in shown] == [0.9, 0.7, 0.5, None]  # higher first, none last
    assert [e.rank for e in shown] == [2, 4, 1, 3]  # the ranks stay the ledger's
    assert [e.place for e in shown] == [1, 2, 3, 4]
    assert ordered(ENTRIES, Order.RANK) == ENTRIES


def test_best_per_user_keeps_each_authors_best_with_the_gap_to_the_next() -> None:
    best = best_per_user(ENTRIES)
    assert [(e.author, e.rank) for e in best] == [("ann", 1), ("bob", 2), (None, 4)]
    assert [e.runs_of_author for e in best] == [2, 1, 1]
    assert [e.gap_to_next for e in best] == [1.1, 150.0 / 110.0, None]


@given(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=12))
def test_best_per_user_shows_each_author_once_at_their_best(authors: list[str | None]) -> None:
    entries = [_entry(i + 1, 10.0 + i, f"r{i}", a, None) for i, a in enumerate(authors)]
    best = best_per_user(entries)
    named = [e.author for e in best if e.author]
    assert len(named) == len(set(named)) == len({a for a in authors if a})
    for e in best:
        if e.author:
            assert e.rank == 1 + authors.index(e.author)
    assert sum(e.runs_of_author or 0 for e in best) == len(authors)


def test_a_comparison_names_the_field_that_separates_the_runs() -> None:
    differences = [
        FieldDifference("environment.metadata.name", "gpumode-kernelbot-b200", "gpumode-x"),
        FieldDifference("environment.spec.hardware.formFactor", "runner:B200", "runner:NVIDIA"),
        FieldDifference("implementation.spec.source.fileName", "a.py", "b.py"),
    ]
    assert explained("environment", differences) == (
        "environment (spec.hardware.formFactor: runner:B200 ≠ runner:NVIDIA)"
    )
    only_b = [FieldDifference("protocol.spec.version", None, "1.1", in_a=False)]
    assert explained("protocol", only_b) == "protocol (spec.version: absent ≠ 1.1)"
    assert explained("workload", differences) == "workload"  # no field of it differs here
    assert explained(None, differences) is None
