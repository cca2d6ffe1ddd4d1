"""Judging a scenario against its targets and printing the tables."""

from __future__ import annotations

import math
import os
from typing import Any

from rich.table import Table

from benchmarks.http.config import TARGET_ECHO_RATIO, TARGET_P99_MS, console

# --------------------------------------------------------------------------- reporting


def _fmt(value: float, digits: int = 0) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:,.{digits}f}"


def _ratio(value: float, anchor: float | None) -> float | None:
    if not anchor or math.isnan(anchor) or math.isnan(value):
        return None
    return round(value / anchor, 3)


def _show_ratio(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:.2f}"


def _pass(ok: bool) -> str:
    return "[green]pass[/]" if ok else "[red]fail[/]"


def judge(scenario: dict[str, Any], echo: dict[str, Any] | None) -> dict[str, Any]:
    """Ratios against the anchors measured in this run, and each §13 target met or not."""
    http, ver = scenario["http"], scenario["verification"]
    rate, p99 = http["perSecond"], http["latencyMs"].get("p99", math.nan)
    echo_rate = echo["perSecond"] if echo else None
    echo_p99 = echo["latencyMs"]["p99"] if echo else None
    groups = scenario["inProcess"].get("groups") or []
    best_group = max((g["appendsPerSecond"] for g in groups), default=None)
    return {
        "ratios": {
            "httpToEcho": _ratio(rate, echo_rate),
            "httpToInProcess": _ratio(rate, scenario["inProcess"]["appendsPerSecond"]),
            "httpToInProcessGroups": _ratio(rate, best_group),
            "p99ToEchoP99": _ratio(p99, echo_p99),
        },
        "pass": {
            "appendsPerSecond": echo_rate is not None and rate >= TARGET_ECHO_RATIO * echo_rate,
            "p99": p99 <= TARGET_P99_MS,
            "inclusionProofInEveryReply": ver["acknowledged"] > 0
            and ver["proofsVerified"] == ver["acknowledged"] == ver["rootsMatchRecomputedLog"],
            "noneLostLogDense": ver["present"] == ver["acknowledged"] and ver["dense"],
        },
    }


def _scenario_rows(table: Table, s: dict[str, Any], echo: dict[str, Any] | None) -> None:
    http, ver, inproc = s["http"], s["verification"], s["inProcess"]
    lat, ratios, ok = http["latencyMs"], s["judged"]["ratios"], s["judged"]["pass"]
    table.add_section()
    table.add_row(
        f"[bold]{s['label']}[/]: appends/s over HTTP",
        _fmt(http["perSecond"]),
        f"echo {_fmt(echo['perSecond'])}" if echo else "",
        _show_ratio(ratios["httpToEcho"]),
        f"≥ {TARGET_ECHO_RATIO} × echo",
        _pass(ok["appendsPerSecond"]),
    )
    table.add_row(
        "  vs Ledger.append in-process, 1 thread",
        _fmt(http["perSecond"]),
        f"{_fmt(inproc['appendsPerSecond'])}/s",
        _show_ratio(ratios["httpToInProcess"]),
        "",
        "",
    )
    for group in inproc.get("groups") or []:
        table.add_row(
            f"  vs Ledger.append_many, groups of {group['group']}, in-process",
            _fmt(http["perSecond"]),
            f"{_fmt(group['appendsPerSecond'])}/s",
            _show_ratio(_ratio(http["perSecond"], group["appendsPerSecond"])),
            "",
            "",
        )
    table.add_row(
        "  latency p99 ms (p50)",
        f"{_fmt(lat['p99'], 1)} ({_fmt(lat['p50'], 1)})",
        f"echo {echo['latencyMs']['p99']:.1f}" if echo else "",
        _show_ratio(ratios["p99ToEchoP99"]),
        f"≤ {TARGET_P99_MS:.0f}",
        _pass(ok["p99"]),
    )
    table.add_row(
        "  inclusion proof in every 201, verified",
        f"{ver['proofsVerified']}/{ver['acknowledged']}",
        "",
        "",
        "every reply",
        _pass(ok["inclusionProofInEveryReply"]),
    )
    table.add_row(
        "  acknowledged / present / lost",
        f"{ver['acknowledged']} / {ver['present']} / {ver['lost'] + ver['mismatched']}",
        "",
        "",
        "lost 0, log dense",
        _pass(ok["noneLostLogDense"]),
    )
    failed = sum(v for k, v in http["statuses"].items() if k != "201")
    table.add_row("  non-201 replies", str(failed), "", "", "", "")
    log = http.get("serverLog", {})
    if log.get("workerDeaths") or log.get("errorLines"):
        table.add_row(
            "  server log: workers killed / error lines",
            f"{log['workerDeaths']} / {log['errorLines']}",
            "",
            "",
            "",
            "",
        )


def _breakdown_table(s: dict[str, Any]) -> Table:
    detail = Table(title=f"where a request's time goes: {s['label']} (mean ms per append)")
    detail.add_column("stage")
    detail.add_column("ms", justify="right")
    detail.add_column("note", justify="right")
    for row in s["breakdownMs"]:
        note = ""
        if "groups" in row:
            note = (
                f"{row['groups']} groups, mean {row['meanGroup']}, max {row['maxGroup']}; "
                f"writer CPU {row['writerCpuMs']:.2f} ms/append, busy {row['writerBusy']:.0%}"
            )
        if "statementsPerAppend" in row:
            note = f"{row['statementsPerAppend']:.1f} statements/append"
        detail.add_row("  " * row["level"] + row["stage"], f"{row['ms']:.2f}", note)
    cpu = s["http"]["cpu"]
    database = ""
    if cpu["databaseBackendSeconds"]:
        database = f", PostgreSQL backends {cpu['databaseBackendMsPerRequest']} ms/append"
    detail.caption = (
        f"CPU during the load: server {cpu['serverMsPerRequest']} ms/append{database}, "
        f"clients {cpu['clientMsPerRequest']} ms/request; machine {cpu['machineBusy']:.0%} "
        f"busy of {os.cpu_count()} cores, {cpu['otherCoresBusy']} cores busy with other work"
    )
    return detail


def print_report(result: dict[str, Any]) -> None:
    echo = result["echo"]
    clients = result["config"]["clients"]
    table = Table(
        title=f"HTTP attestation appends, {clients} clients on loopback (docs/design.md §13)"
    )
    for column in ("figure", "value", "anchor", "ratio", "target", ""):
        table.add_column(column, justify="left" if column in ("figure", "target") else "right")
    if echo:
        table.add_row(
            "echo anchor: requests/s (p50 / p99 ms)",
            _fmt(echo["perSecond"]),
            "",
            "",
            "HTTP-stack ceiling",
            f"{echo['latencyMs']['p50']:.1f} / {echo['latencyMs']['p99']:.1f}",
        )
    for s in result["scenarios"]:
        _scenario_rows(table, s, echo)
    console.print(table)
    for s in result["scenarios"]:
        if s["http"]["failures"]:
            console.print(f"[yellow]{s['label']} non-201 replies:[/]")
            for what, count in s["http"]["failures"].items():
                console.print(f"  {count} x {what}")
        if s["breakdownMs"]:
            console.print(_breakdown_table(s))
