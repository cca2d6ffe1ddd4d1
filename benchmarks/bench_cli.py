"""The command line on the real catalog (issue 14): import time and read-command start-up.

Two figures, each against an anchor measured in the same run:

- ``catalog``: ``kernelindex init`` then ``kernelindex import kernelindex-catalog`` of the
  whole KernelIndex catalog fixture (7,857 runs) into a fresh SQLite home, one process, as a
  user runs it; the anchor is a bare parse of the same file (zstd stream, one ``json.loads``
  per line, nothing kept). Target: the import takes ≤ 90 s.
- ``startup``: wall time of ``kernelindex show RUN``, ``leaderboard KEY`` and ``history RUN``
  on that ledger, each a fresh process (the median of ``REPEATS``, the commands and the
  anchor taking turns); the anchor is ``python -c pass``. Target: each ≤ 0.5 s.

The start-up is timed as an installed CLI starts: with each module's bytecode cached, as
Python keeps it after the first run (one untimed run of each command first). Where the
environment sets ``PYTHONDONTWRITEBYTECODE`` (this repository's sandbox does), every process
would instead compile every project module from source; the cache then goes to
``.cache/pycache/`` (``PYTHONPYCACHEPREFIX``, nothing is written into the source tree), and
the times without it are reported too, as rows of their own that are not judged.

``--quick`` imports the catalog with only ``QUICK_RUNS`` of its runs (a smoke test). Each
run imports afresh into ``.cache/catalog/`` (the import is the figure), and the start-up times
are taken on that ledger; ``--startup-only`` times the start-up on the ledger a previous run
imported (importing it only if there is none).

    python -m benchmarks --only catalog startup
    python -m benchmarks.bench_cli [--quick] [--startup-only] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import zstandard
from rich.console import Console

from benchmarks.suite import Context, FigureResult, Row, at_most, fmt

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache"
CATALOG = REPO / "conformance/fixtures/kernelindex-catalog/catalog-2026-08-16-0022af0b.jsonl.zst"
IMPORT_TARGET_S = 90.0
START_TARGET_S = 0.5
REPEATS = 5
QUICK_RUNS = 300
PYCACHE = CACHE / "pycache"
NO_BYTECODE = "PYTHONDONTWRITEBYTECODE"


def _kernelindex() -> list[str]:
    """The installed console script where there is one (what users run), else the module."""
    script = Path(sys.executable).with_name("kernelindex")
    return [str(script)] if script.exists() else [sys.executable, "-m", "api.cli"]


def _env(home: Path, bytecode: bool = False) -> dict[str, str]:
    """The environment of a timed process; ``bytecode``: each module's bytecode is kept (in
    ``PYCACHE``) and read back, as an installed CLI's is, whatever ``NO_BYTECODE`` says."""
    env = {
        **os.environ,
        "KERNELINDEX_HOME": str(home / "home"),
        "KERNELINDEX_DB": f"sqlite:///{home / 'ledger.db'}",
        "COLUMNS": "120",
    }
    if bytecode:
        env.pop(NO_BYTECODE, None)
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def _cli(home: Path, *args: str, bytecode: bool = False) -> float:
    """Wall seconds of one ``kernelindex`` process; it must succeed."""
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own CLI, arguments we chose
        [*_kernelindex(), *args],
        env=_env(home, bytecode),
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"kernelindex {' '.join(args)} failed: {done.stderr[-500:]}")
    return seconds


def bare_parse(path: Path) -> float:
    """Seconds to decompress the catalog and ``json.loads`` each line, keeping nothing."""
    started = time.perf_counter()
    with path.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as stream:
        buffer = b""
        while chunk := stream.read(1 << 20):
            *complete, buffer = (buffer + chunk).split(b"\n")
            for line in complete:
                if line.strip():
                    json.loads(line)
        if buffer.strip():
            json.loads(buffer)
    return time.perf_counter() - started


def bare_parse_text(path: Path) -> float:
    """:func:`bare_parse` of an uncompressed JSON-lines file."""
    started = time.perf_counter()
    for line in path.read_bytes().split(b"\n"):
        if line.strip():
            json.loads(line)
    return time.perf_counter() - started


def _source(quick: bool, home: Path) -> Path:
    """The catalog file to import: the whole fixture, or for --quick the same file with only
    its first ``QUICK_RUNS`` benchmark and serving runs (and their measurements): the file is
    sorted by table, so a prefix of it would hold no run at all."""
    if not quick:
        return CATALOG
    part = home / f"catalog-{QUICK_RUNS}-runs.jsonl"
    runs: set[object] = set()
    kept: list[bytes] = []
    with CATALOG.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as s:
        lines = s.read().split(b"\n")
    for line in lines:
        if not line.strip():
            continue
        item = json.loads(line)
        table, row = item["table"], item["row"]
        if table in ("benchmark_runs", "serving_runs"):
            if len(runs) >= QUICK_RUNS:
                continue
            runs.add(row["id"])
        elif "runId" in row and row["runId"] not in runs:
            continue
        kept.append(line)
    part.write_bytes(b"\n".join(kept) + b"\n")
    return part


def import_catalog(quick: bool, console: Console) -> dict[str, Any]:
    """Import into a fresh home under ``.cache/``; the timings."""
    home = _home(quick)
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    source = _source(quick, home)
    console.log(f"importing {source.name} into a fresh SQLite home")
    init = _cli(home, "init")
    seconds = _cli(home, "import", "kernelindex-catalog", str(source))
    parse = bare_parse(source) if not quick else bare_parse_text(source)
    return {"home": str(home), "init": init, "import": seconds, "bareParse": parse}


def _references(home: Path) -> tuple[str, str]:
    """A ranked run's name and its comparison key, from the ledger's views."""
    with sqlite3.connect(home / "ledger.db") as db:
        found = db.execute(
            "SELECT r.name, r.comparison_key FROM kernelindex_view_runs r "
            "JOIN kernelindex_view_ranks k ON k.run_digest = r.run_digest "
            "WHERE k.rank = 1 ORDER BY r.ingested_position LIMIT 1"
        ).fetchone()
    if found is None:
        raise RuntimeError("the imported catalog has no ranked run")
    return str(found[0]), str(found[1])


def _timed(
    home: Path, commands: dict[str, list[str]], repeats: int, bytecode: bool
) -> dict[str, Any]:
    """Median wall seconds of each command and of ``python -c pass``, taking turns (so a
    burst of other work on the machine weighs on all alike); with ``bytecode``, after one
    untimed run of each that leaves their bytecode in ``PYCACHE``."""
    anchor_env = _env(home, bytecode)

    def python_pass() -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=anchor_env, check=True)
        return time.perf_counter() - started

    if bytecode:
        python_pass()
        for args in commands.values():
            _cli(home, *args, bytecode=True)
    anchor: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):
        anchor.append(python_pass())
        for name, args in commands.items():
            times[name].append(_cli(home, *args, bytecode=bytecode))
    return {
        "pythonPass": statistics.median(anchor),
        "commands": {name: statistics.median(t) for name, t in times.items()},
        "samples": times,
        "anchorSamples": anchor,
    }


def start_times(home: Path, repeats: int = REPEATS) -> dict[str, Any]:
    """Median wall seconds of each read command and of ``python -c pass``, bytecode cached;
    where the environment keeps no bytecode, also as it runs them (``sourceCompiled``)."""
    _cli(home, "projections", "rebuild")  # views up to date: what follows only reads them
    run, key = _references(home)
    commands = {
        "show": ["show", run],
        "leaderboard": ["leaderboard", key],
        "history": ["history", run],
    }
    result = {"run": run, "key": key, "bytecodeCached": True}
    result |= _timed(home, commands, repeats, bytecode=True)
    if os.environ.get(NO_BYTECODE):
        result["sourceCompiled"] = _timed(home, commands, repeats, bytecode=False)
    return result


def _home(quick: bool) -> Path:
    return CACHE / ("catalog-quick" if quick else "catalog")


def figures(
    ctx: Context,
    catalog: bool = True,
    startup: bool = True,
    reuse: bool = False,
    repeats: int = REPEATS,
) -> list[FigureResult]:
    """``reuse``: time the start-up on the ledger a previous run imported, if there is one
    (no catalog figure then)."""
    if reuse and (_home(ctx.quick) / "ledger.db").exists():
        imported: dict[str, Any] = {"home": str(_home(ctx.quick)), "reused": True}
        catalog = False
    else:
        ctx.step("importing the catalog")
        imported = import_catalog(ctx.quick, ctx.console)
    out: list[FigureResult] = []
    what = f"the catalog with {QUICK_RUNS} of its runs" if ctx.quick else "the whole catalog"
    if catalog:
        seconds, parse = imported["import"], imported["bareParse"]
        ok, to_target = at_most(seconds, IMPORT_TARGET_S)
        out.append(
            FigureResult(
                "catalog",
                f"catalog import, one process, SQLite file ({what})",
                [
                    Row(
                        "catalog",
                        "kernelindex import kernelindex-catalog, s",
                        f"{seconds:.1f}",
                        f"bare parse {parse:.2f} s",
                        seconds / parse if parse else None,
                        f"≤ {IMPORT_TARGET_S:.0f} s",
                        ok,
                        to_target,
                    )
                ],
                imported,
                why="per run: the pure-Python RFC 8785 canonicalisation of each manifest "
                "and envelope, the manifest schema check, Ed25519 signing, then the grouped "
                "admission (64 runs per commit)",
            )
        )
    if startup:
        ctx.step("timing read commands")
        out.append(_startup_figure(start_times(Path(imported["home"]), repeats), what))
    return out


def _startup_figure(times: dict[str, Any], what: str) -> FigureResult:
    anchor = times["pythonPass"]
    rows = []
    for name, seconds in times["commands"].items():
        ok, to_target = at_most(seconds, START_TARGET_S)
        rows.append(
            Row(
                "startup",
                f"kernelindex {name}, cold process, s",
                f"{seconds:.2f}",
                f"python -c pass {fmt(anchor * 1000)} ms",
                seconds / anchor if anchor else None,
                f"≤ {START_TARGET_S} s",
                ok,
                to_target,
            )
        )
    compiled = times.get("sourceCompiled")
    if compiled is not None:  # for reference: as this environment runs them
        source_anchor = compiled["pythonPass"]
        rows += [
            Row(
                "startup",
                f"  {name}, every module compiled from source ({NO_BYTECODE}), s",
                f"{seconds:.2f}",
                f"python -c pass {fmt(source_anchor * 1000)} ms",
                seconds / source_anchor if source_anchor else None,
            )
            for name, seconds in compiled["commands"].items()
        ]
    return FigureResult(
        "startup",
        f"read commands' start-up on {what}",
        rows,
        times,
        why=STARTUP_WHY,
    )


# What the start-up is made of: instructions of one `kernelindex show` (valgrind
# --tool=cachegrind, bytecode cached; 2.47 G in all, python -c pass 0.08 G), 2026-12-03.
STARTUP_WHY = (
    "nearly all of it is imports (instructions of show): SQLAlchemy 26 %, typer and rich "
    "11 %, pydantic 9 % and the statement models 7 %, the ledger's aggregates (eventsourcing "
    "event classes) 6 %, the PostgreSQL dialect projections.runner imports on SQLite too 5 %, "
    "the projections 8 %, eventsourcing and the other ledger and domain modules 15 %, the "
    "interpreter's own start 3 %; the command's own work "
    "is 12 % for show, 10 % for history (the five manifest kinds' validators built, then each "
    "ingestion re-verified) and 6 % for leaderboard (rich's table)"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--startup-only",
        action="store_true",
        help="time the start-up only, on the ledger a previous run imported (if any)",
    )
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each command")
    args = parser.parse_args(argv)
    console = Console()
    ctx = Context(quick=args.quick, large=False, console=console)
    chosen = figures(
        ctx,
        catalog=not args.startup_only,
        reuse=args.startup_only,
        repeats=args.repeats,
    )
    for figure in chosen:
        for row in figure.rows:
            console.print(f"{row.name}: {row.value} (anchor {row.anchor}; target {row.target})")


if __name__ == "__main__":
    main()
