"""How numbers and measurements read for people, on every page and in every CLI table.

One place, so a value reads the same in ``show``, ``leaderboard`` and the pages: latencies
and other durations in the unit a person reads best, other values to 6 significant digits,
and published numbers without a float's binary tail (``0.049509000000000004``).
"""

from __future__ import annotations

import csv
import io
from typing import Any

from api.service.models.views import Leaderboard
from domain.quantities import finite, format_value
from domain.ranking import RankEntry, View


def format_measurement(primary: dict[str, Any]) -> str:
    """A run's primary measurement: "mean latency 1.751 ms", "geomean score 69.92 µs"."""
    metric = primary.get("metric")
    if not metric or metric == "none":
        return "none stated by the source"
    statistic = primary.get("statistic") or "unspecified"
    return f"{statistic} {metric} {format_value(primary.get('value'), primary.get('unit'))}"


def source_summary(source: str | None, metrics: dict[str, Any] | None) -> str | None:
    """The one line a source sums a result up with, from its own metrics (SOL-ExecBench:
    "SOL 0.5598 · 1.17× reference · 13/16 cases faster"); None when it publishes none."""
    m = metrics or {}
    if source == "sol-execbench" and finite(m.get("sol_score")):
        parts = [f"SOL {m['sol_score']:.4f}"]
        if finite(m.get("avg_speedup")):
            parts.append(f"{m['avg_speedup']:.2f}× reference")
        if isinstance(m.get("fast_1_count"), int) and isinstance(m.get("fast_1_total"), int):
            parts.append(f"{m['fast_1_count']}/{m['fast_1_total']} cases faster")
        return " · ".join(parts)
    return None


def _cell(value: Any) -> str:
    return "—" if value is None else str(value)


def comparison_rows(result: dict[str, Any]) -> list[list[str]]:
    """A comparison (``compare_many``) as rows: a header, one row per run, then the fields
    that differ (a row each, a column per run)."""
    runs = result["runs"]
    header = ["", *(str(r["name"] or r["run"][:19]) for r in runs)]
    rows = [
        header,
        ["run digest", *(r["run"] for r in runs)],
        ["primary", *(format_measurement(r["primary"]) for r in runs)],
        ["× first", *(f"{r['ratioToFirst']:.4f}" if r["ratioToFirst"] else "—" for r in runs)],
        ["comparable with first", *("yes" if r["comparableWithFirst"] else "no" for r in runs)],
    ]
    rows += [[d["path"], *(_cell(v) for v in d["values"])] for d in result["differences"]]
    return rows


def comparison_csv(result: dict[str, Any]) -> str:
    # Names and values come from third parties: a cell a spreadsheet would run as a formula
    # is written as text (OWASP CSV injection).
    def cell(text: str) -> str:
        return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows([cell(c) for c in row] for row in comparison_rows(result))
    return buffer.getvalue()


def comparison_markdown(result: dict[str, Any]) -> str:
    rows = comparison_rows(result)

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    verdict = (
        "All runs are in one comparison group."
        if result["comparable"]
        else f"Not comparable: {result['notComparableBy']}"
        + (f": {result['notComparableField']}." if result.get("notComparableField") else ".")
    )
    return (
        "\n".join(
            [verdict, "", line(rows[0]), line(["---"] * len(rows[0])), *(line(r) for r in rows[1:])]
        )
        + "\n"
    )


def unranked_reason(record: dict[str, Any]) -> str:
    """Why a run record has no source-native rank: the ranking policy's own reason
    (``RankEntry.why_unranked``), with what to do when its workload is missing."""
    value = (record.get("primary") or {}).get("value")
    entry = RankEntry(
        run=str(record.get("digest")),
        comparison_key=str(record.get("comparisonKey") or ""),
        status=str(record.get("status") or ""),
        claimed=float(value) if isinstance(value, int | float) and finite(value) else None,
        retracted=bool(record.get("retracted")),
        superseded=record.get("supersededBy") is not None,
    )
    why = entry.why_unranked(View.SOURCE_NATIVE) or "its group has not been ranked yet"
    if not entry.comparison_key:
        workload = record.get("workloadDigest")
        why += (
            f": the ledger does not hold its workload manifest ({workload}); "
            "`kernelindex attach RUN` once it does"
            if workload
            else " (it names no workload)"
        )
    if entry.superseded:
        why += f" by {record['supersededBy']}"
    return why


# A leaderboard table's columns, least useful first: dropped in this order when the terminal
# is too narrow for them beside a readable run name (the latency bar goes before any).
DROP_ORDER = ("evidence", "× #1")
MIN_RUN = 16  # characters of a run's name kept at the least (the rest is cut with "…")
MIN_BAR = 10
MAX_BAR = 40
GAP = "  "


def clip(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut with an ellipsis."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def board_columns(board: Leaderboard) -> dict[str, list[str]]:
    """A leaderboard's cells by column, headers first (the run column uncut)."""
    native = View(board.view) is View.SOURCE_NATIVE
    entries = board.entries
    reordered = board.order != "rank" or board.per_user
    columns: dict[str, list[str]] = {}
    if reordered:
        columns["place"] = ["place", *(str(e.place) for e in entries)]
    columns["rank"] = ["rank", *(str(e.rank) for e in entries)]
    columns["run"] = [
        "user · run" if board.per_user else "run",
        *(f"{e.author} · {e.name}" if board.per_user and e.author else e.name for e in entries),
    ]
    columns["evidence"] = ["evidence", *(e.evidence_level for e in entries)]
    columns["value"] = [
        "value",
        *(format_value(e.value, e.unit if native else "ns") for e in entries),
    ]
    columns["× #1"] = [
        "× #1",
        *(f"{e.ratio_to_first:.3f}" if e.ratio_to_first is not None else "—" for e in entries),
    ]
    if board.group is not None and board.group.has_sol_score:
        columns["SOL"] = [
            "SOL",
            *(f"{e.sol_score:.4f}" if e.sol_score is not None else "—" for e in entries),
        ]
    if board.per_user:
        columns["next"] = [
            "next",
            *(f"+{(e.gap_to_next - 1) * 100:.1f}%" if e.gap_to_next else "—" for e in entries),
        ]
    return columns


def board_table(board: Leaderboard, width: int) -> list[str]:
    """A leaderboard as lines of at most ``width`` characters: one line a run, names cut
    with an ellipsis (never wrapped), the least useful columns dropped when too narrow, a
    latency bar (shorter: faster) where there is room."""
    columns = board_columns(board)
    numeric = {"place", "rank", "value", "× #1", "SOL", "next"}

    def used(names: list[str]) -> int:
        """Width of every column but the run's, with the gaps."""
        return sum(max(len(c) for c in columns[n]) + len(GAP) for n in names if n != "run")

    shown = list(columns)
    for name in DROP_ORDER:
        if width - used(shown) >= MIN_RUN:
            break
        shown.remove(name)
    natural = max(len(c) for c in columns["run"])
    run_width = max(MIN_RUN, min(natural, width - used(shown)))
    room = width - used(shown) - run_width - len(GAP)
    bars = room >= MIN_BAR
    bar_width = min(MAX_BAR, room)
    values = [float(e.value) for e in board.entries]
    top = max(values, default=0.0) or 1.0
    lines = []
    for row in range(len(board.entries) + 1):
        cells = []
        for name in shown:
            size = run_width if name == "run" else max(len(c) for c in columns[name])
            text = clip(columns[name][row], size)
            cells.append(text.rjust(size) if name in numeric else text.ljust(size))
        if bars:
            # The ratio first: a value near the float's top (1e308) times the width overflows.
            cells.append(
                "latency" if row == 0 else "█" * max(1, round(bar_width * (values[row - 1] / top)))
            )
        lines.append(GAP.join(cells).rstrip()[:width])
    return lines
