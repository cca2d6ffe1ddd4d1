"""How numbers and measurements read for people, on every page and in every CLI table.

One place, so a value reads the same in ``show``, ``leaderboard`` and the pages: latencies
and other durations in the unit a person reads best, other values to 6 significant digits,
and published numbers without a float's binary tail (``0.049509000000000004``).
"""

from __future__ import annotations

import csv
import io
from typing import Any

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
        else f"Not comparable: {result['notComparableBy']}."
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
