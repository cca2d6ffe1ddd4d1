"""A verification report as the CLI prints it: the verdict, a table of checks, the findings.

Shared by ``verify``, ``audit`` and ``history --server``.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from api.cli.console import out
from ledger.verification_report import Report
from ledger.verify import Outcome

_STYLE = {
    Outcome.VERIFIED: "bold green",
    Outcome.FAILED: "bold red",
    Outcome.STALE: "bold yellow",
    Outcome.UNANCHORED: "bold yellow",
}


def print_report(report: Report, outcome: Outcome | None = None) -> None:
    if outcome is None:
        outcome = Outcome.VERIFIED if report.verified else Outcome.FAILED
    verdict = f"[{_STYLE[outcome]}]{outcome}[/]"
    facts = ", ".join(f"{k} {v}" for k, v in report.facts.items() if not isinstance(v, dict))
    out.print(f"{verdict}  {escape(report.subject)}: {escape(facts)}")
    table = Table(title_justify="left")
    table.add_column("check")
    table.add_column("passed", justify="right")
    table.add_column("failed", justify="right")
    for check in sorted(set(report.passed) | set(report.failed)):
        failed = report.failed[check]
        table.add_row(check, str(report.passed[check]), f"[bold red]{failed}[/]" if failed else "0")
    out.print(table)
    for finding in report.findings:
        out.print(f"[red]✗[/] {finding.check} at {escape(finding.where)}: {escape(finding.reason)}")
    for note in report.notes:
        out.print(f"[yellow]note[/]: {escape(note)}")
