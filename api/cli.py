"""The ``kernelindex`` command line: a thin edge over the ledger services.

Every refusal prints ``error[<code>]: <reason>`` on stderr and exits non-zero; ``--json``
prints machine-readable output on stdout.

Each command lives in the ``api.cli_*`` module that ``COMMANDS`` names, and a run imports
only the module of the command it runs (``kernelindex show`` never loads the importers, the
server or the agent): start-up is most of a read command's time. ``--help``, or a name that is
not a command, loads them all.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer

# Top-level command (or group) → the module whose ``register(app)`` adds it, in the order
# ``--help`` lists them. tests/cli/test_cli_start.py checks each module adds exactly these.
COMMANDS: dict[str, str] = {
    "init": "api.cli_home",
    "digest": "api.cli_home",
    "demo": "api.cli_home",
    "attest": "api.cli_runs",
    "retract": "api.cli_runs",
    "show": "api.cli_runs",
    "history": "api.cli_runs",
    "keys": "api.cli_keys",
    "log": "api.cli_log",
    "export": "api.cli_log",
    "verify": "api.cli_log",
    "audit": "api.cli_log",
    "submit": "api.cli_rerun",
    "rerun": "api.cli_rerun",
    "projections": "api.cli_views",
    "leaderboard": "api.cli_views",
    "compare": "api.cli_views",
    "search": "api.cli_views",
    "import": "api.cli_import",
    "artifact": "api.cli_import",
    "agent": "api.cli_agent",
    "serve": "api.cli_serve",
    "db": "api.cli_db",
    "ingest": "api.cli_ingest",
    "attach": "api.cli_ingest",
    "projector": "api.cli_workers",
    "sequencer": "api.cli_workers",
}


def build_app(argv: Sequence[str] | None = None) -> typer.Typer:
    """The CLI with the commands ``argv`` can reach: the one it names, or every command."""
    app = typer.Typer(
        name="kernelindex",
        help="KernelIndex Ledger: signed, append-only, offline-verifiable GPU-kernel benchmarks.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
    )
    # A callback keeps the app a group even with one command loaded (``kernelindex serve``):
    # Typer would otherwise run that command as the root and refuse its name as an argument.
    app.callback()(_root)
    named = next((a for a in argv or () if not a.startswith("-")), None)
    wanted = [COMMANDS[named]] if named in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for module in wanted:
        importlib.import_module(module).register(app)
    return app


def _root() -> None:
    """KernelIndex Ledger: signed, append-only, offline-verifiable GPU-kernel benchmarks."""


def __getattr__(name: str) -> Any:
    # ``from api.cli import app``: the whole CLI, built on first use (tests drive it in-process).
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(name)


def main() -> None:
    # Start-up is most of a read command's time (benchmarks/bench_cli.py). The modules a
    # command imports live as long as the process: collecting garbage while they load only
    # walks them again and again, so the collector waits until they are loaded and frozen.
    gc.disable()
    app = build_app(sys.argv[1:])
    gc.freeze()
    gc.enable()
    try:
        app()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    if isinstance(code, str):  # sys.exit("message"): say it, as the interpreter would
        print(code, file=sys.stderr)
    # The command's work is done: what it wrote is committed and its files are closed. Tearing
    # down the interpreter (every module, the connection pools) would only add a sixth of a
    # second, so the process ends here, once what it printed is flushed.
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed, or a reader that went away (a broken pipe)
            code = code or 1
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


if __name__ == "__main__":
    main()
