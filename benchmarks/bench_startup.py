"""How long the ``kernelindex`` command takes to start, as a multiple of a bare interpreter.

Each command is a fresh process on a small ledger (the demo's, built into
``.cache/startup/``), timed end to end; the anchor is ``python -c pass`` measured in the same
run, the commands and the anchor taking turns so that a burst of other work on the machine
weighs on all alike. The figure is the ratio of medians:

- ``kernelindex --help``: at most ``READ_TARGET`` × ``python -c pass``;
- the read commands ``kernelindex show RUN`` and ``leaderboard KEY``: at most ``READ_TARGET`` ×;
- ``kernelindex verify BUNDLE --trust-root ROOT`` on a run's exported bundle (the offline
  verifier, which needs no database): at most ``VERIFY_TARGET`` ×.

The start-up is timed as an installed CLI starts: each module's bytecode cached, as Python
keeps it after the first run (one untimed run of each command first). Where the environment
sets ``PYTHONDONTWRITEBYTECODE`` the cache goes to ``.cache/pycache/`` (``PYTHONPYCACHEPREFIX``,
nothing is written into the source tree).

    python -m benchmarks --only startup-ratio
    python -m benchmarks.bench_startup [--repeats N] [--module]

``--module`` runs ``python -m api.cli`` from this checkout instead of the installed
``kernelindex`` script (to time another checkout, e.g. a ``git worktree`` of an older commit).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks.suite import Context, FigureResult, Row, at_most, fmt

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache" / "startup"
PYCACHE = HERE / ".cache" / "pycache"
SEED = "sol-submission-38823"  # the demo's seed run, by name
READ_TARGET = 10.0
VERIFY_TARGET = 5.0
REPEATS = 11
QUICK_REPEATS = 3
NO_BYTECODE = "PYTHONDONTWRITEBYTECODE"


def kernelindex(module: bool = False) -> list[str]:
    """The installed console script (what users run), else (or with ``module``) the module."""
    script = Path(sys.executable).with_name("kernelindex")
    if script.exists() and not module:
        return [str(script)]
    return [sys.executable, "-m", "api.cli"]


def environment(root: Path) -> dict[str, str]:
    """A timed process's environment: the small ledger, and bytecode kept and read back."""
    env = {
        **os.environ,
        "KERNELINDEX_HOME": str(root / "home"),
        "KERNELINDEX_DB": f"sqlite:///{root / 'ledger.db'}",
        "COLUMNS": "120",
        "PYTHONPYCACHEPREFIX": str(PYCACHE),
    }
    env.pop(NO_BYTECODE, None)
    return env


def _run(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one process; it must succeed."""
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own CLI and interpreter, arguments we chose
        argv, env=env, cwd=REPO, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-800:]}")
    return seconds


def prepare(root: Path, cli: list[str]) -> dict[str, str]:
    """A fresh demo ledger at ``root`` and a bundle of its seed run; the commands' arguments."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    env = environment(root)
    home, db = env["KERNELINDEX_HOME"], env["KERNELINDEX_DB"]
    _run([*cli, "demo", "--home", home, "--db", db], env)
    bundle = root / "seed.bundle.jsonl"
    _run([*cli, "export", "--run", SEED, "-o", str(bundle)], env)
    _run([*cli, "projections", "rebuild"], env)  # views up to date: reads only read
    with sqlite3.connect(root / "ledger.db") as connection:
        found = connection.execute(
            "SELECT comparison_key FROM kernelindex_view_runs WHERE name = ?", (SEED,)
        ).fetchone()
    if found is None:
        raise RuntimeError(f"the demo ledger has no run {SEED}")
    return {
        "bundle": str(bundle),
        "trustRoot": str(Path(home) / "trust-root.json"),
        "key": found[0],
    }


def commands(refs: dict[str, str]) -> dict[str, list[str]]:
    """The timed commands (arguments after ``kernelindex``), by name."""
    return {
        "--help": ["--help"],
        "show": ["show", SEED],
        "leaderboard": ["leaderboard", refs["key"]],
        "verify": ["verify", refs["bundle"], "--trust-root", refs["trustRoot"]],
    }


def time_commands(
    root: Path,
    cli: list[str],
    timed: dict[str, list[str]],
    repeats: int,
    tick: Callable[[str], None] = lambda _what: None,
) -> dict[str, Any]:
    """Median wall seconds of each command and of ``python -c pass``, taking turns, after one
    untimed run of each (which leaves their bytecode in ``PYCACHE``)."""
    env = environment(root)
    anchor_argv = [sys.executable, "-c", "pass"]
    _run(anchor_argv, env)
    for args in timed.values():
        _run([*cli, *args], env)
    anchor: list[float] = []
    samples: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(repeats):
        anchor.append(_run(anchor_argv, env))
        tick("python -c pass")
        for name, args in timed.items():
            samples[name].append(_run([*cli, *args], env))
            tick(f"kernelindex {name}")
    python_pass = statistics.median(anchor)
    medians = {name: statistics.median(s) for name, s in samples.items()}
    return {
        "cli": cli,
        "commands": {name: [*cli, *args] for name, args in timed.items()},
        "repeats": repeats,
        "pythonPass": python_pass,
        "seconds": medians,
        "ratios": {name: seconds / python_pass for name, seconds in medians.items()},
        "samples": samples,
        "anchorSamples": anchor,
    }


def target(name: str) -> float:
    return VERIFY_TARGET if name == "verify" else READ_TARGET


def measure(
    repeats: int, module: bool = False, tick: Callable[[str], None] = lambda _what: None
) -> dict[str, Any]:
    cli = kernelindex(module)
    refs = prepare(CACHE, cli)
    return time_commands(CACHE, cli, commands(refs), repeats, tick)


def rows(result: dict[str, Any]) -> list[Row]:
    anchor = result["pythonPass"]
    out = []
    for name, seconds in result["seconds"].items():
        ratio = seconds / anchor
        ok, to_target = at_most(ratio, target(name))
        label = "kernelindex --help" if name == "--help" else f"kernelindex {name}"
        out.append(
            Row(
                "startup-ratio",
                f"{label}, fresh process, ms",
                fmt(seconds * 1000),
                f"python -c pass {fmt(anchor * 1000)} ms",
                ratio,
                f"ratio ≤ {target(name):g}",
                ok,
                to_target,
            )
        )
    return out


def figure(ctx: Context) -> FigureResult:
    """``python -m benchmarks``' start-up figure: each command against ``python -c pass``."""
    repeats = QUICK_REPEATS if ctx.quick else REPEATS
    ctx.step("building the demo ledger and a bundle")
    cli = kernelindex()
    refs = prepare(CACHE, cli)
    timed = commands(refs)
    total = repeats * (len(timed) + 1)
    done = 0

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        ctx.step(f"{what} ({done}/{total} processes)")

    result = time_commands(CACHE, cli, timed, repeats, tick)
    return FigureResult(
        "startup-ratio",
        "CLI start-up against python -c pass, demo ledger",
        rows(result),
        result,
        why=STARTUP_WHY,
    )


# What is left of a read command's start-up once the CLI imports only the command it runs:
# `python -X importtime` of each, bytecode cached.
STARTUP_WHY = (
    "the commands' own imports below the CLI: show and leaderboard open the ledger through "
    "ledger.application, which imports admission (domain.statements' pydantic models, "
    "eventsourcing, SQLAlchemy Core); verify imports ledger.verify, whose bundle module loads "
    "domain.rerun_binding (domain.statements, domain.documents with ruamel.yaml), "
    "domain.importers.records, msgspec and concurrent.futures.process on every run"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each command")
    parser.add_argument(
        "--module", action="store_true", help="run `python -m api.cli` from this checkout"
    )
    args = parser.parse_args(argv)
    console = Console()
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("building the demo ledger", total=args.repeats * 5)

        def tick(what: str) -> None:
            progress.update(task, description=what, advance=1)

        result = measure(args.repeats, args.module, tick)
    console.print(f"{' '.join(result['cli'])}: median of {args.repeats}, this machine now")
    for row in rows(result):
        verdict = "pass" if row.passed else "FAIL"
        console.print(
            f"  {row.name}: {row.value} ({row.ratio:.2f}× {row.anchor}; {row.target}) {verdict}"
        )


if __name__ == "__main__":
    main()
