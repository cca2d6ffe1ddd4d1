"""How long the ``kernelindex`` command takes to start, as a multiple of a bare interpreter.

Each command is a fresh process on a small ledger (the demo's, built into
``.cache/startup/``), timed end to end; the anchor is ``python -c pass`` measured in the same
run, the commands and the anchor taking turns so that a burst of other work on the machine
weighs on all alike. The figure is the ratio of medians:

- ``kernelindex --help``: at most ``READ_TARGET`` × ``python -c pass``;
- the read commands ``kernelindex show RUN``, ``leaderboard KEY``, ``history RUN``,
  ``search WORD``, ``keys list`` and ``keys list --json``: at most ``READ_TARGET`` ×;
- ``kernelindex verify BUNDLE --trust-root ROOT`` on a run's exported bundle (the offline
  verifier, which needs no database): at most ``VERIFY_TARGET`` ×.

The start-up is timed as an installed CLI starts: each module's bytecode cached, as Python
keeps it after the first run (one untimed run of each command first). Where the environment
sets ``PYTHONDONTWRITEBYTECODE`` the cache goes to ``.cache/pycache/`` (``PYTHONPYCACHEPREFIX``,
nothing is written into the source tree).

    python -m benchmarks --only startup-ratio
    python -m benchmarks.bench_startup [--repeats N] [--module] [--before CHECKOUT] [--out F]

``--module`` runs ``python -m api.cli`` from this checkout instead of the installed
``kernelindex`` script. ``--before CHECKOUT`` also times ``python -m api.cli`` from another
checkout (e.g. a ``git worktree`` of an older commit) on the same ledger, its processes taking
turns with this one's: a before-and-after table from one run, where the machine's load weighs
on both alike. ``--out`` writes every sample as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def checkout_env(checkout: Path | None) -> dict[str, str]:
    """What runs ``python -m api.cli`` from ``checkout`` rather than this one."""
    return {} if checkout is None else {"PYTHONPATH": str(checkout)}


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


def _timed(argv: list[str], env: dict[str, str], cwd: Path = REPO) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one process run in ``cwd``; it must
    succeed. The CPU time is what the process itself spent: on a machine other work keeps
    busy it waits for a core, which the wall time counts and the CPU time does not."""
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own CLI and interpreter, arguments we chose
        argv, env=env, cwd=cwd, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-800:]}")
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return seconds, cpu


def _run(argv: list[str], env: dict[str, str], cwd: Path = REPO) -> float:
    """Wall seconds of one process (run in ``cwd``); it must succeed."""
    return _timed(argv, env, cwd)[0]


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
        "history": ["history", SEED],
        "search": ["search", "B200"],
        "keys list": ["keys", "list"],
        # The page alone, which reads through the driver without SQLAlchemy (issue 33).
        "keys list --json": ["keys", "list", "--json"],
        "verify": ["verify", refs["bundle"], "--trust-root", refs["trustRoot"]],
    }


def time_commands(
    root: Path,
    cli: list[str],
    timed: dict[str, list[str]],
    repeats: int,
    tick: Callable[[str], None] = lambda _what: None,
    before: Path | None = None,
    extra: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Median wall seconds of each command and of ``python -c pass``, taking turns, after one
    untimed run of each (which leaves their bytecode in ``PYCACHE``); with ``before``, the
    same commands from that checkout too, each right after this checkout's; ``extra``: other
    processes (whole argv) timed in the same turns."""
    extra = extra or {}
    env = environment(root)
    sides = {"after": (env, REPO)}
    if before is not None:
        sides["before"] = ({**env, **checkout_env(before)}, before)
    anchor_argv = [sys.executable, "-c", "pass"]
    _run(anchor_argv, env)
    for argv in extra.values():
        _run(argv, env)
    for side_env, cwd in sides.values():
        for args in timed.values():
            _run([*cli, *args], side_env, cwd)
    anchor: list[tuple[float, float]] = []
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {
        side: {name: [] for name in timed} for side in sides
    }
    extra_samples: dict[str, list[tuple[float, float]]] = {name: [] for name in extra}
    for _ in range(repeats):
        anchor.append(_timed(anchor_argv, env))
        tick("python -c pass")
        for name, argv in extra.items():
            extra_samples[name].append(_timed(argv, env))
            tick(name)
        for name, args in timed.items():
            for side, (side_env, cwd) in sides.items():
                samples[side][name].append(_timed([*cli, *args], side_env, cwd))
                tick(f"kernelindex {name}" + (f" ({side})" if before is not None else ""))
    python_pass = statistics.median(wall for wall, _ in anchor)
    python_pass_cpu = statistics.median(cpu for _, cpu in anchor)

    def figures(side: str) -> dict[str, Any]:
        medians = {name: statistics.median(w for w, _ in s) for name, s in samples[side].items()}
        cpu = {name: statistics.median(c for _, c in s) for name, s in samples[side].items()}
        return {
            "seconds": medians,
            "ratios": {name: seconds / python_pass for name, seconds in medians.items()},
            "cpuSeconds": cpu,
            "cpuRatios": {name: seconds / python_pass_cpu for name, seconds in cpu.items()},
            "samples": {name: [w for w, _ in s] for name, s in samples[side].items()},
            "cpuSamples": {name: [c for _, c in s] for name, s in samples[side].items()},
        }

    result = {
        "cli": cli,
        "commands": {name: [*cli, *args] for name, args in timed.items()},
        "repeats": repeats,
        "pythonPass": python_pass,
        "pythonPassCpu": python_pass_cpu,
        "anchorSamples": [wall for wall, _ in anchor],
        "anchorCpuSamples": [cpu for _, cpu in anchor],
        **figures("after"),
    }
    if before is not None:
        result["before"] = {"checkout": str(before), **figures("before")}
    if extra:
        result["floors"] = {
            name: {
                "argv": extra[name],
                "seconds": statistics.median(w for w, _ in s),
                "ratio": statistics.median(w for w, _ in s) / python_pass,
                "cpuSeconds": statistics.median(c for _, c in s),
                "cpuRatio": statistics.median(c for _, c in s) / python_pass_cpu,
                "samples": [w for w, _ in s],
                "cpuSamples": [c for _, c in s],
            }
            for name, s in extra_samples.items()
        }
    return result


# The least a command can start in: the interpreter importing only the libraries it cannot
# do without, and ending as the CLI ends (``os._exit``, no teardown). Timed with ``--floors``
# in the same turns, to tell a target out of reach from one missed.
FLOORS: dict[str, str] = {
    # Every command: the CLI framework (Typer on its Click) and the console it prints with.
    "floor: typer + rich": "import typer, rich.console",
    # A read command: that, and SQLAlchemy Core, through which every read reaches the views.
    "floor: reads (+ sqlalchemy core)": "import typer, rich.console, rich.table, sqlalchemy",
    # verify's libraries as they were until the manifest models became msgspec Structs
    # (h/manifests): that, Ed25519, msgspec, and pydantic.
    "floor: verify (+ pydantic, ed25519)": (
        "import typer, rich.console, pydantic, msgspec, "
        "cryptography.hazmat.primitives.asymmetric.ed25519"
    ),
    # verify's now that no model is pydantic's: the CLI's parameters (api/cli/parameters.py),
    # the statement models and the manifest models no longer need it.
    "floor: verify without pydantic": (
        "import typer, rich.console, rich.table, msgspec, "
        "cryptography.hazmat.primitives.asymmetric.ed25519"
    ),
    # verify's since a plain command line is read without Typer (api/cli/options.py).
    "floor: verify without typer": (
        "import rich.console, rich.table, msgspec, "
        "cryptography.hazmat.primitives.asymmetric.ed25519"
    ),
}


def floors() -> dict[str, list[str]]:
    return {
        name: [sys.executable, "-c", f"{code}; import os; os._exit(0)"]
        for name, code in FLOORS.items()
    }


def target(name: str) -> float:
    return VERIFY_TARGET if name == "verify" else READ_TARGET


def measure(
    repeats: int,
    module: bool = False,
    tick: Callable[[str], None] = lambda _what: None,
    before: Path | None = None,
    with_floors: bool = False,
) -> dict[str, Any]:
    cli = kernelindex(module or before is not None)
    refs = prepare(CACHE, cli)
    extra = floors() if with_floors else None
    return time_commands(CACHE, cli, commands(refs), repeats, tick, before, extra)


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


# What is left once each command imports only what it uses (`python -X importtime` and
# cProfile of each, bytecode cached; the floors row the libraries alone).
STARTUP_WHY = (
    "below the CLI, what the commands use: Typer and rich (the floors' first row, about 3x); "
    "verify reads a plain command line without Typer (rich, msgspec and Ed25519: the last "
    "floor); a read command imports SQLAlchemy Core (the reads floor) and "
    "builds the read-only Ledger, still the eventsourcing Application with the aggregates, "
    "admission and log (about 5x more); verify validates manifests (msgspec Structs since "
    "h/manifests; the pydantic models were about 3x); and 120-210 dataclasses are made at "
    "import. A "
    "read's own statements through sqlite3 alone: about 4x (benchmarks/startup_sql_floor.py)"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each command")
    parser.add_argument(
        "--module", action="store_true", help="run `python -m api.cli` from this checkout"
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="another checkout whose `python -m api.cli` takes turns with this one's",
    )
    parser.add_argument(
        "--floors", action="store_true", help="also time the libraries each command needs"
    )
    parser.add_argument("--out", type=Path, help="write the result, every sample, as JSON")
    args = parser.parse_args(argv)
    before = args.before.resolve() if args.before is not None else None
    console = Console()
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        per_round = (
            1
            + len(commands({"bundle": "", "trustRoot": "", "key": ""}))
            * (2 if before is not None else 1)
            + (len(FLOORS) if args.floors else 0)
        )
        task = progress.add_task("building the demo ledger", total=args.repeats * per_round)

        def tick(what: str) -> None:
            progress.update(task, description=what, advance=1)

        result = measure(args.repeats, args.module, tick, before, args.floors)
    result["machine"] = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    console.print(f"{' '.join(result['cli'])}: median of {args.repeats}, this machine now")
    for row in rows(result):
        verdict = "pass" if row.passed else "FAIL"
        console.print(
            f"  {row.name}: {row.value} ({row.ratio:.2f}× {row.anchor}; {row.target}) {verdict}"
        )
    cpu_anchor = fmt(result["pythonPassCpu"] * 1000)
    console.print(f"CPU time (user + system) against python -c pass's {cpu_anchor} ms:")
    sides = [("after", result)] + ([("before", result["before"])] if before is not None else [])
    for side, figures in sides:
        for name, ratio in figures["cpuRatios"].items():
            ms = fmt(figures["cpuSeconds"][name] * 1000)
            console.print(f"  {side}: kernelindex {name}: {ms} ms CPU ({ratio:.2f}×)")
    if before is not None:
        console.print(f"before ({before}), same run, wall:")
        for name, ratio in result["before"]["ratios"].items():
            ms = result["before"]["seconds"][name] * 1000
            console.print(f"  kernelindex {name}: {fmt(ms)} ms ({ratio:.2f}×)")
    for name, floor in result.get("floors", {}).items():
        wall, cpu = fmt(floor["seconds"] * 1000), fmt(floor["cpuSeconds"] * 1000)
        console.print(
            f"  {name}: {wall} ms ({floor['ratio']:.2f}×), CPU {cpu} ms ({floor['cpuRatio']:.2f}×)"
        )
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()
