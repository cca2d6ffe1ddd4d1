"""The ``kernelindex`` command line: a thin edge over the ledger services.

Every refusal prints ``error[<code>]: <reason>`` on stderr and exits non-zero; ``--json``
prints machine-readable output on stdout.

Each command lives in the ``api.cli`` module that ``COMMANDS`` names, and a run imports only
the module of the command it runs (``kernelindex show`` never loads the importers, the server
or the agent; ``kernelindex verify`` no database code): start-up is most of a short command's
time. ``--help`` imports none of them (api/cli/lazy.py). A command whose module has a
``fast_main`` door (``kernelindex verify``: api/cli/options.py) runs a plain command line without
Typer at all; Typer (``app``, made on first use) parses everything else.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer

_HELP = "KernelIndex Ledger: signed, append-only, offline-verifiable GPU-kernel benchmarks."


class Lazy:
    """Where a top-level command lives: ``module``'s ``app`` (a ``typer.Typer``) holds it,
    as a command or a group; ``help`` is its first help paragraph, for the group's listing.

    A plain class, not a dataclass (~4 M instructions to make on 3.11, every command's
    start) nor a msgspec Struct (``--help`` loads no msgspec)."""

    __slots__ = ("help", "module")

    def __init__(self, module: str, help: str) -> None:
        self.module = module
        self.help = help


# Top-level command (or group) → the module whose ``app`` holds it and its first help
# paragraph, in the order ``--help`` lists them. tests/cli/test_cli_start.py checks each
# module holds exactly these and each line is the command's own.
COMMANDS: dict[str, Lazy] = {
    "init": Lazy(
        "api.cli.home",
        "Create a ledger home: database, admin/ingester/log keys and trust-root.json.",
    ),
    "digest": Lazy(
        "api.cli.home", "Print the kind, name and sha256 digest of every manifest in FILES."
    ),
    "demo": Lazy(
        "api.cli.home",
        "Build (or reuse) a demo ledger with the seed run, then show its record and history.",
    ),
    "attest": Lazy(
        "api.cli.statements",
        "Append a signed attestation about a run. It never changes the run's evidence level.",
    ),
    "retract": Lazy(
        "api.cli.statements",
        "Retract a run (admin): it leaves rankings; its history and level stay visible.",
    ),
    "show": Lazy("api.cli.runs", "Summarise one run record."),
    "history": Lazy(
        "api.cli.runs",
        "The events of a run, a page at a time: time, type, signer and role, signature check,"
        "\nwhat it says.",
    ),
    "export": Lazy(
        "api.cli.export", "Write a self-contained bundle that `kernelindex verify` checks offline."
    ),
    "verify": Lazy(
        "api.cli.verify",
        "Verify a bundle offline (no network, no database) against the policy you state.",
    ),
    "audit": Lazy(
        "api.cli.audit",
        "Recompute every leaf, the tree and every checkpoint from the stored events; and any"
        "\nbundle's signed heads given, from the log at their size.",
    ),
    "submit": Lazy(
        "api.cli.rerun",
        "Submit a solution with its measured latency: store its artifacts and ingest the run.",
    ),
    "leaderboard": Lazy(
        "api.cli.boards",
        "A comparison group's ranking, with a chart: by key (or a unique prefix), or every group"
        "\nof --definition and/or --gpu, each labelled by what separates it from the others.",
    ),
    "compare": Lazy(
        "api.cli.boards",
        "Field-by-field differences between two runs and the ratio of their primary values.",
    ),
    "search": Lazy(
        "api.cli.search",
        "Find comparison groups: every word must match a run's operation, GPU, dtype or"
        "\nworkload axes, source, stack version, evidence level, author, name or id; --gpu,"
        "\n--source, --dtype, --level, --license and --installable narrow to the runs with that"
        "\nvalue.",
    ),
    "gpus": Lazy(
        "api.cli.registry",
        "GPUs the runs name, with their runs and #1 records; one GPU's with NAME.",
    ),
    "implementations": Lazy(
        "api.cli.registry",
        "Implementations by author, with their runs and #1 records; one author's with NAME.",
    ),
    "projects": Lazy(
        "api.cli.registry",
        "The KernelIndex catalog's projects, with their runs and #1 records; one's with NAME.",
    ),
    "records": Lazy(
        "api.cli.registry",
        "Every time a group's #1 changed, newest first, dated by the source (else admission).",
    ),
    "agent": Lazy(
        "api.cli.agent",
        "Poll the ledger for rerun jobs on this GPU, measure them and post signed results.",
    ),
    "serve": Lazy(
        "api.cli.serve", "Serve the HTTP API (/v1, OpenAPI at /schema) and the pages for a ledger."
    ),
    "ingest": Lazy("api.cli.ingest", "Sign an ingestion statement for a run and append it."),
    "attach": Lazy(
        "api.cli.ingest",
        "Attach the implementation or workload manifest a run names by digest but lacks"
        "\n(signed by an ingester; never changes the evidence level).",
    ),
    "projector": Lazy(
        "api.cli.workers",
        "Fold new events into the read models, batch by batch, until stopped (SIGTERM/SIGINT).",
    ),
    "sequencer": Lazy(
        "api.cli.workers",
        "Sequence events stored without a log leaf and sign checkpoints as the tree grows.",
    ),
    "keys": Lazy("api.cli.keys", "Generate, register, revoke and list signing keys."),
    "log": Lazy("api.cli.log", "The transparency log: checkpoints, proofs, entries."),
    "rerun": Lazy("api.cli.rerun", "Controlled reruns of a run's kernel."),
    "projections": Lazy("api.cli.views", "Rebuild and inspect the read models."),
    "import": Lazy("api.cli.imports", "Import results from a source's saved responses."),
    "artifact": Lazy("api.cli.artifacts", "Content-addressed artifacts."),
    "db": Lazy("api.cli.db", "Database schema: status and explicit upgrades."),
    "witness": Lazy(
        "api.cli.witness", "Witnesses: run one, and see or ask a ledger's (C2SP tlog-witness)."
    ),
}


_app: typer.Typer | None = None


def root() -> typer.Typer:
    """The ``kernelindex`` Typer app (api/cli/lazy.py), made once, on first use."""
    global _app  # noqa: PLW0603 - made once per process, when Typer is needed
    if _app is None:
        from api.cli.lazy import root_app  # noqa: PLC0415

        _app = root_app(COMMANDS, _HELP)
    return _app


def __getattr__(name: str) -> typer.Typer:
    # ``app`` (tests and callers drive the CLI in-process through it): made on first use.
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return root()


# Commands that serve until stopped: they keep pydantic's plugins (an operator's tracing).
SERVING = frozenset({"serve", "agent", "projector", "sequencer", "witness"})


def preload(argv: Sequence[str]) -> ModuleType | None:
    """Import the module of the command ``argv`` names, if it names one."""
    named = next((a for a in argv if not a.startswith("-")), None)
    if named in COMMANDS and named not in SERVING:
        # No pydantic plugin comes with the CLI, and looking for one reads the metadata of
        # every installed distribution when the first model is made (a few per cent of a
        # short command's start-up); set the variable (even empty) to have pydantic look.
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")
    if named in COMMANDS:
        return importlib.import_module(COMMANDS[named].module)
    return None


def main() -> None:
    # The modules a command imports live as long as the process: collecting garbage while
    # they load only walks them again and again, so the collector waits until they are
    # loaded and frozen. Then a command's young collections come as rarely as in every
    # long-running process of the ledger (``ledger.long_lived``): an import's groups allocate
    # as a writer's do. (``--help`` loads no ledger module: tests/cli/test_cli_start.py.)
    gc.disable()
    args = sys.argv[1:]
    module = preload(args)
    gc.freeze()
    if module is not None:
        from ledger.long_lived import settled_thresholds  # noqa: PLC0415

        gc.set_threshold(*settled_thresholds())
    gc.enable()
    code: object = None
    fast = (
        getattr(module, "fast_main", None) if module is not None and args[0] in COMMANDS else None
    )
    if fast is not None:
        try:
            code = fast(args[1:])
        except KeyboardInterrupt:
            code = 130  # as Typer ends a command interrupted
    if code is None:
        try:
            root()()
        except SystemExit as exc:
            code = exc.code
        else:
            code = 0
    if isinstance(code, str):  # sys.exit("message"): say it, as the interpreter would
        print(code, file=sys.stderr)
    # The command's work is done: what it wrote is committed and its files are closed. Tearing
    # down the interpreter (every module, the connection pools) would only add a sixth of a
    # second, so the process ends here, once what it printed is flushed.
    logged = sys.modules.get("logging")  # flushed if a command logged; not imported for it
    if logged is not None:
        logged.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed, or a reader that went away (a broken pipe)
            code = code or 1
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


if __name__ == "__main__":
    main()
