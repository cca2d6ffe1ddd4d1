"""The benchmark suite: every figure of docs/design.md §13, each against an anchor measured in
the same run, in one table.

    python -m benchmarks                          # every figure, default sizes
    python -m benchmarks --quick                  # small sizes: a smoke test
    python -m benchmarks --only ingest growth     # some figures
    python -m benchmarks --large                  # growth up to 10^6 events

Figures (``--only`` names), each measured by its own module:

- ``ingest``: signed ingestion through ``Ledger.append`` / ``append_many``, the manifest
  memo cold, vs bare one-core Ed25519 verification of the same envelopes (``bench_ingest``);
- ``http``: attestation appends over HTTP, 32 clients, vs a bare Litestar handler
  (``bench_http``, 3,000 timed appends, the echo before and after; ``--quick``: 320);
- ``verify``: offline verify vs the measured rate of Ed25519 on every core at once, and vs a
  schema-less Go loop over the same bundle; peak memory vs bundle size (``bench_verify``,
  bundles of 2,000 and 20,000 events; ``--quick``: 200 and 1,000);
- ``rebuild``: projection rebuild events/s vs a bare read of the same events, and
- ``reads``: leaderboard / run-row read p99 vs a primary-key lookup, at 100,000 runs
  (``bench_projections``, ledger cached in ``.cache/``; ``--quick``: 1,000 runs);
- ``flood``: a run's record, page and history p99 with 2,000 attestations vs 2
  (``bench_flood``; ``--quick``: 200);
- ``readcost``: a run record's p99 while six clients loop on the Atom feed vs alone, on
  the catalog (``bench_read_cost``; ``--quick``: 300 of its runs);
- ``growth``: append latency and proof size at 10^3, 10^4, 10^5 events (``--large``: and
  10^6) vs a bare eventsourcing append at the same size (``bench_growth``; ``--quick``:
  10^2 and 10^3);
- ``catalog``: ``kernelindex import kernelindex-catalog`` of the whole catalog fixture vs a
  bare parse of the file, and
- ``startup``: ``kernelindex show`` / ``leaderboard`` / ``history`` on that ledger, each a
  fresh process, vs ``python -c pass`` (``bench_cli``; ``--quick``: the catalog with
  300 of its runs);
- ``startup-ratio``: ``kernelindex --help``, ``show``, ``leaderboard``, ``history``,
  ``search``, ``keys list`` and ``verify`` on the demo ledger, each a fresh process, as a
  multiple of ``python -c pass`` measured in the same run (``bench_startup``; ``--quick``:
  3 runs of each instead of 11).

Every anchor and stage is timed on wall time and on thread-CPU time, and each figure's load
average is recorded before and after it (issue 36: figures that mean the same on a busy
machine). A ratio is judged only where its anchor, measured again after the timed phase,
kept its speed within 10 % (``benchmarks.steadiness``; ingest, http, verify): otherwise its
row reads "unsteady — not judged" and the count of targets met says how many were not.
Prints one table (figure, value, anchor, ratio, target, pass/fail), its notes
(load averages, stretch targets), then by how much each missed target is missed; writes
``benchmarks/results/suite-<date>.json`` (``--quick``: ``suite-<date>-quick.json``; ``--out``
to choose).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from benchmarks import (
    bench_cli,
    bench_flood,
    bench_growth,
    bench_http,
    bench_ingest,
    bench_projections,
    bench_read_cost,
    bench_startup,
    bench_verify,
)
from benchmarks.steadiness import LIMIT, UNSTEADY
from benchmarks.suite import Context, FigureResult, Row, load, load_text

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
FIGURES = (
    "ingest",
    "http",
    "verify",
    "rebuild",
    "reads",
    "flood",
    "readcost",
    "growth",
    "catalog",
    "startup",
    "startup-ratio",
)
TITLES = {
    "ingest": "signed ingestion",
    "http": "HTTP appends",
    "verify": "offline verify",
    "rebuild": "projection rebuild",
    "reads": "projection reads",
    "flood": "reads of a flooded run",
    "readcost": "cheap reads under expensive loops",
    "growth": "growth",
    "catalog": "catalog import",
    "startup": "CLI start-up",
    "startup-ratio": "CLI start-up against python -c pass",
}

Runner = Callable[[Context], list[FigureResult]]


def _plan(selected: list[str]) -> list[tuple[tuple[str, ...], Runner]]:
    """The modules to run, in order; rebuild and reads share one ledger and one run."""
    plan: list[tuple[tuple[str, ...], Runner]] = []
    if "ingest" in selected:
        plan.append((("ingest",), lambda ctx: [bench_ingest.figure(ctx)]))
    if "http" in selected:
        plan.append((("http",), lambda ctx: [bench_http.figure(ctx)]))
    if "verify" in selected:
        plan.append((("verify",), lambda ctx: [bench_verify.figure(ctx)]))
    projection = tuple(f for f in ("rebuild", "reads") if f in selected)
    if projection:
        plan.append(
            (
                projection,
                lambda ctx: bench_projections.figures(
                    ctx, rebuild="rebuild" in projection, reads="reads" in projection
                ),
            )
        )
    if "flood" in selected:
        plan.append((("flood",), lambda ctx: [bench_flood.figure(ctx)]))
    if "readcost" in selected:
        plan.append((("readcost",), lambda ctx: [bench_read_cost.figure(ctx)]))
    if "growth" in selected:
        plan.append((("growth",), lambda ctx: [bench_growth.figure(ctx)]))
    cli = tuple(f for f in ("catalog", "startup") if f in selected)
    if cli:
        plan.append(
            (
                cli,
                lambda ctx: bench_cli.figures(
                    ctx, catalog="catalog" in cli, startup="startup" in cli
                ),
            )
        )
    if "startup-ratio" in selected:
        plan.append((("startup-ratio",), lambda ctx: [bench_startup.figure(ctx)]))
    return plan


def _ratio(value: float | None) -> str:
    if value is None or math.isnan(value):
        return ""
    return f"{value:.3f}" if abs(value) < 0.1 else f"{value:.2f}"


def _verdict(row: Row) -> str:
    if not row.judged:
        return f"[yellow]{UNSTEADY}[/]"
    return "" if row.passed is None else ("[green]pass[/]" if row.passed else "[red]fail[/]")


def figure_verdict(figure: FigureResult) -> str:
    """A figure's progress line: "fail" if any target failed, else "not judged" if any
    was not judged (its anchor drifted: not a pass), else "pass"; with the count not judged."""
    unjudged = sum(1 for r in figure.rows if not r.judged)
    if not figure.passed:
        return f"fail, {unjudged} not judged (unsteady)" if unjudged else "fail"
    return f"not judged ({unjudged} unsteady)" if unjudged else "pass"


def tally(figures: list[FigureResult]) -> tuple[int, int, int]:
    """(targets met, targets judged, targets not judged: their anchor drifted)."""
    rows = [r for f in figures for r in f.rows]
    return (
        sum(1 for r in rows if r.passed),
        sum(1 for r in rows if r.passed is not None),
        sum(1 for r in rows if not r.judged),
    )


def tally_text(figures: list[FigureResult]) -> str:
    """``3/5 targets met`` and, where some were not, how many were not judged."""
    met, judged, unjudged = tally(figures)
    text = f"{met}/{judged} targets met"
    if unjudged:
        text += f"; {unjudged} not judged (anchor drifted more than {LIMIT:.0%} within the run)"
    return text


def table(figures: list[FigureResult], title: str) -> Table:
    out = Table(title=title, title_justify="left")
    for column in ("figure", "value", "anchor", "ratio", "target", "pass/fail"):
        out.add_column(column, justify="right" if column in ("value", "ratio") else "left")
    for n, figure in enumerate(figures):
        if n:
            out.add_section()
        for row in figure.rows:
            out.add_row(
                row.name,
                row.value,
                row.anchor,
                _ratio(row.ratio),
                row.target,
                _verdict(row),
            )
    return out


def misses(figures: list[FigureResult]) -> list[str]:
    """One line per missed target: the value against the target, and the figure's why."""
    lines: list[str] = []
    for figure in figures:
        missed = [r for r in figure.rows if r.passed is False]
        for row in missed:
            line = f"[red]missed[/] {row.name.strip()}: {row.value} against {row.target}"
            if row.to_target is not None and row.to_target > 0 and not math.isinf(row.to_target):
                line += f" (at {row.to_target:.3g} of the target: {1 / row.to_target:.3g}× short)"
            if row.note:
                line += f"; {row.note}"
            lines.append(line)
        if missed and figure.why:
            lines.append(f"  why: {figure.why}")
    return lines


def notes(figures: list[FigureResult]) -> list[str]:
    """The table's notes: each figure's load average (1 min) before → after it ran, and
    what its rows note (stretch targets, the load around a timed block, skipped anchors)."""
    lines: list[str] = []
    for figure in figures:
        if figure.load:
            lines.append(
                f"{figure.figure}: load {load_text(figure.load['before'], figure.load['after'])}"
                f" (1, 5, 15 min before: {figure.load['before']}; after: {figure.load['after']})"
            )
        lines.extend(
            f"  {row.name.strip()}: {row.note}"
            for row in figure.rows
            if row.note and row.passed is not False  # a missed row's note is in `misses`
        )
    return lines


def _error(names: tuple[str, ...], exc: BaseException) -> list[FigureResult]:
    text = f"{type(exc).__name__}: {exc}"
    return [
        FigureResult(
            name,
            TITLES[name],
            [Row(name, f"{TITLES[name]}: error", text[:60], passed=False, note=text)],
            {"error": text, "traceback": traceback.format_exc()},
        )
        for name in names
    ]


def run(
    selected: list[str], quick: bool, large: bool, console: Console
) -> tuple[list[FigureResult], float]:
    plan = _plan(selected)
    results: list[FigureResult] = []
    started = time.perf_counter()
    columns = (
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} figures"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        overall = progress.add_task("suite", total=len(selected))
        for names, runner in plan:
            label = " + ".join(TITLES[n] for n in names)
            progress.update(overall, description=label)

            def step(text: str, label: str = label) -> None:
                progress.update(overall, description=f"{label}: {text}")

            ctx = Context(quick=quick, large=large, console=progress.console, step=step)
            before = load()
            t0 = time.perf_counter()
            try:
                done = runner(ctx)
            except Exception as exc:
                done = _error(names, exc)
                progress.console.print(f"[red]{label} failed[/]: {exc}")
            seconds = time.perf_counter() - t0
            after = load()
            for figure in done:
                figure.seconds = round(seconds / len(done), 1)
                figure.load = {"before": before, "after": after}
                verdict = figure_verdict(figure)
                progress.console.print(f"[bold]{figure.title}[/]: {verdict} ({seconds:.0f} s)")
            results.extend(done)
            progress.advance(overall, len(names))
        progress.update(overall, description="done")
    order = {name: n for n, name in enumerate(FIGURES)}
    results.sort(key=lambda f: order[f.figure])
    return results, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--large", action="store_true", help="growth up to 10^6 events")
    parser.add_argument(
        "--only", nargs="+", choices=FIGURES, metavar="FIGURE", help=f"some of {FIGURES}"
    )
    parser.add_argument("--out", type=Path, help="results file (default results/suite-DATE.json)")
    args = parser.parse_args(argv)
    selected = [f for f in FIGURES if f in (args.only or FIGURES)]
    console = Console(width=None if sys.stdout.isatty() else 160)
    today = dt.date.today().isoformat()
    out = args.out or RESULTS / f"suite-{today}{'-quick' if args.quick else ''}.json"
    load_before = load()
    figures, wall = run(selected, args.quick, args.large, console)
    command = "python -m benchmarks " + " ".join(argv)
    title = f"docs/design.md §13 figures, {today}, {os.cpu_count()} cores: {command.strip()}"
    console.print(table(figures, title))
    noted = notes(figures)
    console.print("notes (load average, 1 min, before → after each figure):")
    for line in noted:
        console.print(line, markup=False)
    missed = misses(figures)
    for line in missed:
        console.print(line)
    met, judged, unjudged = tally(figures)
    console.print(f"{tally_text(figures)}; wall time {wall / 60:.1f} min; results: {out}")
    result: dict[str, Any] = {
        "date": today,
        "command": command.strip(),
        "wallSeconds": round(wall, 1),
        "options": {"quick": args.quick, "large": args.large, "only": selected},
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "loadAverageBefore": load_before[0],
            "loadAverageAfter": load()[0],
            "loadAverages": {"before": load_before, "after": load()},
        },
        "targetsMet": met,
        "targetsJudged": judged,
        "targetsNotJudged": unjudged,
        "figures": {
            f.figure: {
                "title": f.title,
                "passed": f.passed,
                "seconds": f.seconds,
                "rows": [r.to_json() for r in f.rows],
                "why": f.why,
                "loadAverage": f.load,
                "detail": f.detail,
            }
            for f in figures
        },
        "missed": [line.replace("[red]", "").replace("[/]", "") for line in missed],
        "notes": noted,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    errors = any("error" in f.detail for f in figures)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
