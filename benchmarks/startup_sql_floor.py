"""The floor of a read command without SQLAlchemy: its own statements through ``sqlite3``.

Issue 33's read commands are to start within 10× ``python -c pass``, and SQLAlchemy Core
alone (with Typer and rich) is about 7–10× (``bench_startup --floors``). The design that
would leave it out: every read's Core statement compiled ahead to SQL text per dialect (a
generated module, a test regenerating and comparing it), read through the ``sqlite3``
driver. Before building it, this measures what it could reach at best: for each read
command, the statements it sends (caught in-process by an SQLAlchemy hook, with their
parameters) are replayed by a fresh process that imports only Typer, rich, msgspec, Ed25519
and ``sqlite3`` and ends as the CLI ends (``os._exit``). That process, timed against
``python -c pass`` and the real command in the same turns, is the floor: the design's ratio
is it plus what the command's own code (the service, the domain, the rendering) costs.

    python -m benchmarks.startup_sql_floor [--repeats N] [--out F]

On the demo ledger that ``bench_startup`` builds (``.cache/startup/``, built here if
absent), bytecode cached as there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.bench_startup import CACHE, REPO, _timed, commands, environment, prepare

# Run in a fresh process: the command in-process, every statement it sends written out.
CATCH = """\
import json, os, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine
out, sent = sys.argv[1], []
@event.listens_for(Engine, "before_cursor_execute")
def _sent(conn, cursor, statement, parameters, context, executemany):
    sent.append([statement, list(parameters) if isinstance(parameters, (list, tuple)) else []])
end = os._exit
def _end(code):
    with open(out, "w") as handle:
        json.dump(sent, handle, default=str)
    end(code)
os._exit = _end
sys.argv = ["kernelindex", *sys.argv[2:]]
from api.cli.main import main
main()
"""

# The floor: the libraries a read needs without SQLAlchemy, and the statements replayed.
REPLAY = """\
import json, os, sqlite3, sys
import typer, rich.console, rich.table, msgspec
import cryptography.hazmat.primitives.asymmetric.ed25519
with open(sys.argv[2]) as handle:
    sent = json.load(handle)
db = sqlite3.connect(sys.argv[1], isolation_level=None)
for statement, parameters in sent:
    if statement.strip().upper() not in ("BEGIN", "COMMIT", "ROLLBACK"):
        db.execute(statement, parameters).fetchall()
os._exit(0)
"""

READS = ("show", "leaderboard", "history", "search")


def caught(root: Path, argv: list[str], name: str) -> Path:
    """The statements ``kernelindex ARGV`` sends, as a JSON file."""
    out = root / f"statements-{name}.json"
    env = environment(root)
    subprocess.run(  # noqa: S603 - our own CLI, arguments we chose
        [sys.executable, "-c", CATCH, str(out), *argv],
        env=env,
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    return out


def measure(repeats: int) -> dict[str, Any]:
    cli = [sys.executable, "-m", "api.cli"]
    refs = prepare(CACHE, cli)
    timed = {name: args for name, args in commands(refs).items() if name in READS}
    env = environment(CACHE)
    db = str(CACHE / "ledger.db")
    runs: dict[str, list[str]] = {"python -c pass": [sys.executable, "-c", "pass"]}
    for name, args in timed.items():
        statements = caught(CACHE, args, name)
        runs[f"{name}: statements via sqlite3"] = [
            sys.executable,
            "-c",
            REPLAY,
            db,
            str(statements),
        ]
        runs[f"kernelindex {name}"] = [*cli, *args]
    for argv in runs.values():  # bytecode cached, as bench_startup times
        _timed(argv, env)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, argv in runs.items():
            samples[name].append(_timed(argv, env))
    wall = {n: statistics.median(w for w, _ in s) for n, s in samples.items()}
    cpu = {n: statistics.median(c for _, c in s) for n, s in samples.items()}
    anchor, anchor_cpu = wall["python -c pass"], cpu["python -c pass"]
    return {
        "repeats": repeats,
        "seconds": wall,
        "cpuSeconds": cpu,
        "ratios": {n: s / anchor for n, s in wall.items()},
        "cpuRatios": {n: s / anchor_cpu for n, s in cpu.items()},
        "statements": {
            name: len(json.loads((CACHE / f"statements-{name}.json").read_text("utf-8")))
            for name in timed
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs of each process")
    parser.add_argument("--out", type=Path, help="write the result as JSON")
    args = parser.parse_args(argv)
    result = measure(args.repeats)
    print(f"median of {args.repeats}; × python -c pass (CPU, then wall)")
    for name, ratio in result["cpuRatios"].items():
        ms = result["cpuSeconds"][name] * 1000
        print(f"  {name}: {ms:.0f} ms CPU ({ratio:.2f}×), wall {result['ratios'][name]:.2f}×")
    print(f"  statements sent: {result['statements']}")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()
