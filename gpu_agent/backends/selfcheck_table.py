"""The self-check's table and reports: one row per case, written as each sample finishes.

Factored out of ``gpu_agent/selfcheck.py`` (which documents what the columns mean). Pure
formatting and files; nothing here touches a device.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_agent.backends.timing_slack import agree


@dataclass
class CaseRow:
    sample: str
    case: str
    axes: str
    status: str
    median_ns: float | None = None
    ci95_ns: tuple[float, float] | None = None
    samples: int | None = None
    independent_ns: float | None = None
    method: str | None = None
    note: str = ""
    event_overhead_ns: float | None = None  # empty kernel under the backend's timing loop

    @property
    def ratio(self) -> float | None:
        if self.median_ns is None or not self.independent_ns:
            return None
        return self.median_ns / self.independent_ns

    def agrees(self, ratio_tolerance: float) -> bool | None:
        """Whether the two timings agree (timing_slack.agree); None when there is no pair."""
        if self.median_ns is None or not self.independent_ns:
            return None
        return agree(self.median_ns, self.independent_ns, ratio_tolerance, self.event_overhead_ns)


@dataclass
class SampleReport:
    name: str
    ok: bool
    verdict: str
    rows: list[CaseRow] = field(default_factory=list)
    result: dict[str, Any] | None = None


def _ns(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f}us" if value >= 1000 else f"{value:.0f}ns"


TABLE_HEADER = (
    f"{'sample':<24} {'case':<18} {'status':<16} {'median':>10} {'CI95':>21} "
    f"{'n':>5} {'indep.':>10} {'ratio':>7}  note"
)


def format_rows(rows: Sequence[CaseRow], ratio_tolerance: float) -> list[str]:
    """One table line per case; ``!`` marks timings that do not agree (timing_slack)."""
    lines = []
    for row in rows:
        ci = f"[{_ns(row.ci95_ns[0])}, {_ns(row.ci95_ns[1])}]" if row.ci95_ns else "-"
        ratio = row.ratio
        ratio_text = "-" if ratio is None else f"{ratio:.3f}"
        if row.agrees(ratio_tolerance) is False:
            ratio_text += "!"
        lines.append(
            f"{row.sample:<24} {row.axes:<18} {row.status:<16} {_ns(row.median_ns):>10} "
            f"{ci:>21} {row.samples or '-':>5} {_ns(row.independent_ns):>10} "
            f"{ratio_text:>7}  {row.note}"
        )
    return lines


def format_table(reports: Sequence[SampleReport], ratio_tolerance: float) -> str:
    lines = [TABLE_HEADER, "-" * len(TABLE_HEADER)]
    for report in reports:
        lines.extend(format_rows(report.rows, ratio_tolerance))
    lines.append("")
    for report in reports:
        lines.append(f"{'PASS' if report.ok else 'FAIL'}  {report.name}: {report.verdict}")
    return "\n".join(lines)


class ReportOutput:
    """Where the table and the reports go, written as each sample finishes."""

    def __init__(self, table: Path | None, reports: Path | None) -> None:
        out = os.environ.get("OUT")
        self.table = table or (Path(out) / "selfcheck-table.txt" if out else None)
        self.reports = reports or (Path(out) / "selfcheck.json" if out else None)
        if self.table is not None:
            self.table.write_text(TABLE_HEADER + "\n" + "-" * len(TABLE_HEADER) + "\n", "utf-8")

    def sample_done(self, reports: Sequence[SampleReport], ratio_tolerance: float) -> None:
        report = reports[-1]
        lines = [*format_rows(report.rows, ratio_tolerance)]
        lines.append(f"{'PASS' if report.ok else 'FAIL'}  {report.name}: {report.verdict}")
        print("\n".join(lines), flush=True)
        if self.table is not None:
            with self.table.open("a", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")
        if self.reports is not None:
            write_json(self.reports, reports)


def write_json(path: Path, reports: Sequence[SampleReport]) -> None:
    path.write_text(
        json.dumps(
            [
                {
                    "sample": r.name,
                    "ok": r.ok,
                    "verdict": r.verdict,
                    "rows": [{**vars(row), "ratio": row.ratio} for row in r.rows],
                    "result": r.result,
                }
                for r in reports
            ],
            indent=2,
            default=lambda o: None if isinstance(o, float) and math.isnan(o) else str(o),
        ),
        "utf-8",
    )
