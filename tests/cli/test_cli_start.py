"""The CLI loads only the module of the command it runs (issue 14: read commands start fast;
issue 33: lazy command groups, and an offline verifier that loads no database code).

What a process loads is read from the real command: its entry point run in a fresh process,
which lists ``sys.modules`` as it ends. Exact, where a timing would be noise on a shared
machine (the times are benchmarks/bench_startup.py's).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from cli_session import Cli
from typer.testing import CliRunner

from api.cli.main import COMMANDS, app

REPO = Path(__file__).resolve().parents[2]
SEED = "sol-submission-38823"  # the demo's seed run, by name
KERNELINDEX = [sys.executable, "-m", "api.cli"]

# What the offline verifier must never load: the database stack and the read models.
DATABASE_STACK = {
    "sqlalchemy",
    "eventsourcing",
    "eventsourcing_sqlalchemy",
    "litestar",
    "psycopg",
    "projections",
}


# The CLI's own modules `kernelindex verify` runs on: the entry point and its command table,
# the consoles and the parameter table (not Typer's group, helpers or parameter types), the
# command and its report.
VERIFY_CLI_MODULES = {
    "api.cli.main",
    "api.cli.console",
    "api.cli.options",
    "api.cli.verify",
    "api.cli.report",
}

# The command-line framework: `kernelindex verify` with plain arguments loads none of it
# (issue 33: Typer and its Click were about a quarter of the command's start).
CLI_FRAMEWORK = {"typer", "click", "rich_click", "pydantic", "pydantic_core"}


def _database_modules(loaded: set[str]) -> set[str]:
    return {
        m
        for m in loaded
        if m.split(".")[0] in DATABASE_STACK
        or m.startswith(("ledger.store", "ledger.application", "ledger.aggregates"))
    }


# Runs the real entry point (api.cli.main:main, as the console script does) with the
# arguments after the file name; as the process ends, writes every module it holds to the file.
ENTRY_POINT = """\
import json, os, sys
listing, end = sys.argv[1], os._exit
def exit_after_listing(code):
    with open(listing, "w") as handle:
        json.dump(sorted(sys.modules), handle)
    end(code)
os._exit = exit_after_listing
sys.argv = ["kernelindex", *sys.argv[2:]]
from api.cli.main import main
main()
"""


def _imported(
    argv: list[str], tmp_path: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``kernelindex ARGV`` as a user does, in a fresh process: its result, and every
    module the process held when it ended."""
    listing = tmp_path / "modules.json"
    listing.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", ENTRY_POINT, str(listing), *argv],
        cwd=REPO,
        env={**(env or os.environ), "COLUMNS": "100"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert listing.exists(), done.stderr[-2000:]
    return done, set(json.loads(listing.read_text("utf-8")))


def _names(group: Any) -> set[str]:
    return set(group.commands)


def test_each_module_holds_exactly_the_commands_the_table_gives_it() -> None:
    for module in dict.fromkeys(entry.module for entry in COMMANDS.values()):
        held = typer.main.get_group(importlib.import_module(module).app)
        assert _names(held) == {c for c, e in COMMANDS.items() if e.module == module}, module


def test_each_listing_line_is_the_commands_own_first_help_paragraph() -> None:
    """``--help`` lists each command by the table's line, loading none of them: the line is
    what the command's own help says first (what Typer would list, had it loaded it)."""
    root = typer.main.get_command(app)
    ctx = root.make_context("kernelindex", ["--help"], resilient_parsing=True)
    for name, entry in COMMANDS.items():
        command = root.get_command(ctx, name)  # loaded: it is about to run
        assert command is not None and command.name == name
        own = inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0]
        assert own.strip() == entry.help, name


def test_help_and_a_typo_read_as_before_and_load_no_command(tmp_path: Path) -> None:
    listed = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100"})
    assert listed.exit_code == 0
    panel = listed.stdout.split("─ Commands ─", 1)[1]
    assert re.findall(r"^│ (\S+) ", panel, re.MULTILINE) == list(COMMANDS)
    typo = CliRunner().invoke(app, ["shwo"])
    assert typo.exit_code == 2
    assert "No such command 'shwo'. Did you mean 'show'?" in typo.output

    done, loaded = _imported(["--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert all(f"│ {name} " in done.stdout for name in COMMANDS)
    assert {m for m in loaded if m.split(".")[0] == "api"} == {
        "api",
        "api.cli",
        "api.cli.lazy",
        "api.cli.main",
        "api.cli.options",
        "api.cli.parameters",
    }
    assert not {m for m in loaded if m.split(".")[0] in {"domain", "ledger", "projections"}}
    assert _database_modules(loaded) == set()
    assert "sqlalchemy" not in loaded and "pydantic" not in loaded
    # Nor the schema library: the command table is a dataclass, not a msgspec Struct.
    assert "msgspec" not in loaded


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The demo ledger on SQLite, and a bundle of its seed run (the environment's values)."""
    root = tmp_path_factory.mktemp("cli-start")
    env = {
        **os.environ,
        "KERNELINDEX_HOME": str(root / "home"),
        "KERNELINDEX_DB": f"sqlite:///{root / 'ledger.db'}",
    }
    demo = ["demo", "--home", env["KERNELINDEX_HOME"], "--db", env["KERNELINDEX_DB"]]
    bundle = root / "seed.bundle.jsonl"
    for argv in (demo, ["export", "--run", SEED, "-o", str(bundle)]):
        subprocess.run([*KERNELINDEX, *argv], env=env, cwd=REPO, check=True, capture_output=True)
    return env | {"BUNDLE": str(bundle), "ROOT": str(root / "home" / "trust-root.json")}


def test_verify_loads_none_of_the_database_stack_and_still_verifies(
    demo: dict[str, str], tmp_path: Path
) -> None:
    """``kernelindex verify`` checks a bundle offline: the running command imports no
    SQLAlchemy, eventsourcing, Litestar, psycopg, read model or store module, and says
    what the same command says in-process with the whole CLI loaded."""
    argv = ["verify", demo["BUNDLE"], "--trust-root", demo["ROOT"]]
    done, loaded = _imported(argv, tmp_path, demo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"VERIFIED  {demo['BUNDLE']}: ")
    assert _database_modules(loaded) == set()
    assert "ledger.verify" in loaded and "api.cli.verify" in loaded
    # Nor Typer, Click or pydantic: the command line is read from verify's parameter table
    # without them (api/cli/options.py); Typer reads only what that does not take.
    assert not {m for m in loaded if m.split(".")[0] in CLI_FRAMEWORK}
    # It checks the bundle's manifests against their schemas: msgspec Structs, no pydantic
    # (issue 33: pydantic was most of verify's start).
    assert "domain.manifests.models.benchmark_run" in loaded
    assert not {m for m in loaded if m.split(".")[0] in {"pydantic", "pydantic_core"}}
    # A bundle of one batch is verified in this process: no worker pool is imported for it,
    # nor the progress bar's live display (stdout is a pipe), the HTTP client or structlog.
    assert not {
        m
        for m in loaded
        if m.split(".")[0] in {"multiprocessing", "httpx", "structlog"}
        or m in {"concurrent.futures.process", "rich.progress", "rich.live"}
    }
    # No witness policy given nor named by the trust root: its parser and quorum rule (and
    # the cosignature formats) are not imported.
    assert not {m for m in loaded if m.startswith("ledger.witness")}
    # A bundle of an ingested run carries no rerun job or artifact: nothing of the importers
    # (their records, mappings and names serve `import` and reruns) is loaded to verify it.
    assert not {m for m in loaded if m.startswith("domain.importers")}
    # Nor the rerun result's words (their enums) nor the bootstrap's statistics: a bundle
    # without reruns uses neither.
    assert "domain.rerun_words" not in loaded and "statistics" not in loaded
    # Nor another command's modules, the writer's or the agent's.
    assert not {
        m
        for m in loaded
        if m.split(".")[0] in {"gpu_agent", "projections"}
        or m.startswith(("api.server", "api.service", "ledger.submission", "ledger.importing"))
        or (m.startswith("api.cli.") and m not in VERIFY_CLI_MODULES)
    }

    in_process = CliRunner().invoke(app, argv, env={"COLUMNS": "100"})
    assert in_process.exit_code == 0 and in_process.stdout == done.stdout

    done, loaded = _imported([*argv, "--json"], tmp_path, demo)
    assert done.returncode == 0 and json.loads(done.stdout)["outcome"] == "VERIFIED"
    assert _database_modules(loaded) == set()
    assert not {m for m in loaded if m.split(".")[0] in CLI_FRAMEWORK}

    # What it does not take (here a usage error) Typer reads and words, as ever.
    done, loaded = _imported([*argv, "--rank", "0"], tmp_path, demo)
    assert done.returncode == 2 and "Invalid value for '--rank'" in done.stderr, done.stderr
    assert "typer" in loaded


# The classes of the project's own modules `kernelindex verify` loads that are dataclasses:
# none (each costs ~0.6 ms to create at import on 3.11, ~4 M instructions; a msgspec Struct
# ~12 us). The command table and the fast parameters are plain classes (--help loads no
# msgspec), the envelope and the heads state msgspec Structs.
VERIFY_DATACLASSES: set[str] = set()


def test_verify_creates_no_other_dataclass_and_no_emoji_table(
    demo: dict[str, str], tmp_path: Path
) -> None:
    """The start-up of ``kernelindex verify`` (issue 33, at most 5x ``python -c pass``): the
    fold, evidence, ranking and key classes a bundle's claims need are msgspec Structs, and
    the output is printed without rich's emoji table, so a name with ``:colons:`` in it is
    printed as it is spelled."""
    bundle = tmp_path / ":thumbs_up: seed.jsonl"
    bundle.write_bytes(Path(demo["BUNDLE"]).read_bytes())
    argv = ["verify", str(bundle), "--trust-root", demo["ROOT"]]
    done, loaded = _imported(argv, tmp_path, demo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"VERIFIED  {bundle}: ")
    assert "rich._emoji_codes" not in loaded
    ours = sorted(m for m in loaded if m.split(".")[0] in {"api", "domain", "ledger"})
    made = {
        f"{name}.{value.__name__}"
        for name in ours
        for value in vars(importlib.import_module(name)).values()
        if isinstance(value, type)
        and value.__module__ == name
        # made by @dataclass here (a plain subclass of a library's dataclass costs nothing)
        and "__dataclass_fields__" in vars(value)
    }
    assert made == VERIFY_DATACLASSES


def test_a_bundle_path_is_printed_as_it_is_spelled(demo: dict[str, str], tmp_path: Path) -> None:
    """A path is no rich markup: ``[bold]`` in a bundle's name is printed, not obeyed (a
    review found the name's brackets eaten)."""
    bundle = tmp_path / "[bold]seed [red]x.jsonl"
    bundle.write_bytes(Path(demo["BUNDLE"]).read_bytes())
    done, _ = _imported(["verify", str(bundle), "--trust-root", demo["ROOT"]], tmp_path, demo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"VERIFIED  {bundle}: ")


def test_a_tampered_bundle_still_fails_without_the_database_stack(
    demo: dict[str, str], tmp_path: Path
) -> None:
    lines = Path(demo["BUNDLE"]).read_text("utf-8").splitlines()
    event = next(i for i, line in enumerate(lines) if '"type":"event"' in line.replace(" ", ""))
    record = json.loads(lines[event])
    record["envelope"]["payload"] = record["envelope"]["payload"][::-1]
    lines[event] = json.dumps(record)
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(lines) + "\n", "utf-8")
    done, loaded = _imported(
        ["verify", str(tampered), "--trust-root", demo["ROOT"]], tmp_path, demo
    )
    assert done.returncode == 1 and done.stdout.startswith("FAILED"), done.stdout
    assert _database_modules(loaded) == set()
    assert not {m for m in loaded if m.split(".")[0] in CLI_FRAMEWORK}


def test_read_commands_load_no_importer_server_or_agent_and_no_writer(
    demo: dict[str, str], tmp_path: Path
) -> None:
    """On the full path (views not yet folded, or a URL the driver's door does not read:
    here, one with a query), show, history and search read through
    ledger/store/read_only.py (on fresh views every read command reads through the driver
    alone: below): no importer, server or agent module, nor the writers' persistence (and the
    SQL dialects its sqlalchemy_utils loads), nor SQLAlchemy's ORM (the read store uses Core
    only), nor the HTTP client (only with --server), structlog (only when the views warn),
    the bundle writer or the fold's worker pool; and of the service, only the features the
    command uses (api/service/features.py)."""
    full_path = demo | {"KERNELINDEX_DB": demo["KERNELINDEX_DB"] + "?timeout=30"}
    for argv in (
        ["show", SEED],
        ["history", SEED],
        ["search", "B200"],
    ):
        done, loaded = _imported(argv, tmp_path, full_path)
        assert done.returncode == 0, (argv, done.stderr[-2000:])
        assert "ledger.store.read_only" in loaded, argv
        heavy = {
            m
            for m in loaded
            if m.split(".")[0]
            in {
                "litestar",
                "uvicorn",
                "gpu_agent",
                "eventsourcing_sqlalchemy",
                "httpx",
                "structlog",
            }
            or m.startswith(("domain.importers.sol_", "domain.importers.flashinfer", "api.server"))
            or m
            in {
                "sqlalchemy_utils",
                "sqlalchemy.orm",
                "api.client",
                "ledger.bundle",
                "projections.export",
                "concurrent.futures.process",
                # cryptography's key-file formats: the log key is read only to sign
                # (ledger/signing/log_key.py), and a read signs nothing.
                "cryptography.hazmat.primitives.serialization",
            }
        }
        assert heavy == set(), argv
        # The service makes the features a command uses, and imports only theirs.
        unused = {"log", "export", "registry", "records", "admin", "jobs"}
        if argv[0] == "search":
            unused |= {"runs", "boards", "history"}
        assert not {f"api.service.{name}" for name in unused} & loaded, argv
        other_commands = {e.module for c, e in COMMANDS.items() if c != argv[0]} - {
            COMMANDS[argv[0]].module
        }
        assert not other_commands & loaded, argv


def test_show_and_history_reverify_without_the_manifest_models(
    demo: dict[str, str], tmp_path: Path
) -> None:
    """``show`` and ``history`` re-verify the run's stored events, and do not validate the
    manifests admission validated (domain.manifests.canonical_form.admitted_manifest_digest):
    no manifest model (nor pydantic) is loaded; the events they show still verify."""
    for argv in (["show", SEED], ["history", SEED]):
        done, loaded = _imported(argv, tmp_path, demo)
        assert done.returncode == 0, (argv, done.stderr[-2000:])
        assert "ledger.event_verification" in loaded and "domain.manifests.canonical_form" in loaded
        assert not {
            m for m in loaded if m.startswith("domain.manifests.models") or m == "pydantic"
        }, argv
        shows = "✓ verified" if argv[0] == "history" else "the 2 read for this record verified"
        assert shows in done.stdout, argv


# What the commands' modules import, as modules: the libraries and models that load only on
# first use (pydantic serves the HTTP server; the rest serve paths a short command never takes).
ON_FIRST_USE = ("pydantic", "pydantic_core", "structlog", "httpx", "ruamel")
ON_FIRST_USE_MODULES = (
    "domain.statement_models",
    "domain.manifests.models",
    "concurrent.futures.process",
    "cryptography.hazmat.primitives.serialization",
    "rich.progress",
)


def test_the_commands_modules_import_no_model_or_client_library() -> None:
    """Importing the ledger, the service door and the read and verify commands loads no
    pydantic, statement or manifest model, HTTP client or structlog: each loads when a
    statement is checked, a server is asked or the views warn, not with the modules. (A
    running command with parameters loads pydantic anyway: Typer coerces them through it.)"""
    modules = [
        "ledger.application",
        "ledger.history",
        "ledger.verify",
        "api.cli.service",
        *dict.fromkeys(COMMANDS[c].module for c in ("show", "leaderboard", "keys", "verify")),
    ]
    code = (
        f"import json, sys\nfor m in {modules!r}: __import__(m)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(json.loads(done.stdout))
    assert set(modules) <= loaded
    early = {
        m for m in loaded if m.split(".")[0] in ON_FIRST_USE or m.startswith(ON_FIRST_USE_MODULES)
    }
    assert early == set()


def test_the_process_ends_with_the_commands_exit_code_and_its_output_flushed(
    tmp_path: Path,
) -> None:
    """main() ends the process itself once a command is done (start-up and teardown are
    most of a read command's time): exit codes, stdout and stderr are what the command gave,
    also into a pipe or with stdout closed."""
    env = {
        **os.environ,
        "KERNELINDEX_HOME": str(tmp_path / "home"),
        "KERNELINDEX_DB": f"sqlite:///{tmp_path / 'ledger.db'}",
    }

    def run(*argv: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*KERNELINDEX, *argv],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
            **kw,
        )

    init = run("init", "--json")
    assert init.returncode == 0 and json.loads(init.stdout)["keys"]["admin"]
    missing = run("show", "no-such-run")
    assert missing.returncode == 1 and "error[not-found]" in missing.stderr
    usage = run("show")
    assert usage.returncode == 2 and "Missing argument" in usage.stderr
    listed = run("keys", "list", "--json")
    assert listed.returncode == 0 and len(json.loads(listed.stdout)["items"]) == 3  # flushed
    closed = subprocess.run(
        [*KERNELINDEX, "keys", "list"], env=env, cwd=REPO, stdout=subprocess.DEVNULL, check=False
    )
    assert closed.returncode == 0


def test_the_cli_runs_in_process_with_every_command_loaded(tmp_path: Path) -> None:
    """Tests drive ``app`` in-process, one command after another: each loads its module on
    first use and the rest keep working."""
    cli = Cli(tmp_path / "home", f"sqlite:///{tmp_path / 'ledger.db'}")
    assert json.loads(cli("init", "--json").stdout)["keys"]["log"]
    assert len(json.loads(cli("keys", "list", "--json").stdout)["items"]) == 3
    assert cli("log", "checkpoint").stdout.startswith("kernelindex.local/")
    assert "Usage: kernelindex db" in cli("db", "--help").stdout


def test_keys_list_reads_through_the_driver_alone(demo: dict[str, str], tmp_path: Path) -> None:
    """``keys list`` (the page, and the table that re-verifies each key's events) on a
    ledger whose schema is current runs its statements through ``sqlite3`` (issue 33): no
    SQLAlchemy, eventsourcing (not even its aggregates), Litestar, psycopg, read model or
    ledger application is loaded."""
    pages = {}
    for argv in (["keys", "list", "--json"], ["keys", "list"]):
        done, loaded = _imported(argv, tmp_path, demo)
        assert done.returncode == 0, done.stderr[-2000:]
        stack = {
            m
            for m in loaded
            if m.split(".")[0]
            in {"sqlalchemy", "eventsourcing_sqlalchemy", "litestar", "psycopg", "projections"}
            # No eventsourcing at all: the key fold and the event topics need no aggregate.
            or m.split(".")[0] == "eventsourcing"
            or m.startswith(("ledger.application", "ledger.aggregates", "ledger.store.read_only"))
            or m.startswith("api.cli.service")
        }
        assert stack == set(), argv
        pages[len(argv)] = done.stdout
    keys = json.loads(pages[3])["items"]
    assert [k["label"] for k in keys] == ["admin", "ingester", "log", "demo"]
    assert pages[2].count("verified") == len(keys) and "FAILED" not in pages[2]
    assert all(f" {k['label']} " in pages[2] for k in keys)


def test_leaderboard_reads_through_the_driver_alone(demo: dict[str, str], tmp_path: Path) -> None:
    """``leaderboard`` (the seed's SOL board by key, table and ``--json``, in SOL order per
    user, and the listing of a GPU's groups) on the demo's fresh views runs its statements
    through ``sqlite3`` (issue 33): no SQLAlchemy, eventsourcing, Litestar, psycopg, the
    views' Core modules or the event store is loaded, and the board still has its SOL
    scores."""
    key = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"
    printed = {}
    for argv in (
        ["leaderboard", key[:19], "--json"],
        ["leaderboard", key],
        ["leaderboard", key, "--order", "sol-score", "--per-user"],
        ["leaderboard", "--gpu", "B200", "--json"],
    ):
        done, loaded = _imported(argv, tmp_path, demo)
        assert done.returncode == 0, done.stderr[-2000:]
        stack = {
            m
            for m in loaded
            if m.split(".")[0]
            in {
                *("sqlalchemy", "eventsourcing", "eventsourcing_sqlalchemy", "litestar"),
                *("psycopg", "uvicorn", "gpu_agent", "httpx", "structlog"),
            }
            or m.startswith(("domain.importers.sol_", "domain.importers.flashinfer", "api.server"))
            or m
            in {
                # Nor the full service's boards, nor any other command's module.
                "api.service.boards",
                *(e.module for c, e in COMMANDS.items() if e.module != "api.cli.boards"),
                "api.client",
                "ledger.bundle",
                "concurrent.futures.process",
                "cryptography.hazmat.primitives.serialization",
                "projections.tables",
                "projections.queries",
                "projections.view_queries",
                "ledger.store.event_store",
                "ledger.store.read_only",
                "ledger.application",
                "api.cli.service",
            }
        }
        assert stack == set(), argv
        printed[" ".join(argv[2:])] = done.stdout
    board = json.loads(printed["--json"])
    assert [(e["name"], e["solScore"]) for e in board["entries"]] == [
        ("sol-submission-21613", 0.642409),
        ("sol-submission-36818", 0.639916),
        (SEED, 0.559752),
    ]
    assert f"{SEED}" in printed[""] and "0.5598" in printed[""]
    assert "each user's best run, by sol-score" in printed["--order sol-score --per-user"]
    assert key in {g["comparisonKey"] for g in json.loads(printed["B200 --json"])["groups"]}


def test_show_and_history_read_through_the_driver_alone(
    demo: dict[str, str], tmp_path: Path
) -> None:
    """``show RUN`` and ``history RUN`` (the table and ``--json``) on fresh views resolve the
    run, read its events and re-verify them, and read what the views say of it, through
    ``sqlite3`` (issue 33): no SQLAlchemy, eventsourcing, Litestar, psycopg, Core read
    model, event store or ledger application is loaded."""
    printed = {}
    for argv in (
        ["history", SEED, "--json"],
        ["history", SEED],
        ["show", SEED, "--json"],
        ["show", SEED],
    ):
        done, loaded = _imported(argv, tmp_path, demo)
        assert done.returncode == 0, done.stderr[-2000:]
        stack = {
            m
            for m in loaded
            if m.split(".")[0]
            in {"sqlalchemy", "eventsourcing", "eventsourcing_sqlalchemy", "litestar", "psycopg"}
            or m
            in {
                "projections.tables",
                "projections.queries",
                "projections.view_queries",
                "ledger.store.event_store",
                "ledger.store.read_only",
                "ledger.application",
                "ledger.aggregates",
                "ledger.history",
                "api.cli.service",
            }
        }
        assert stack == set(), argv
        printed[" ".join(argv[::2])] = done.stdout
    events = json.loads(printed["history --json"])["events"]
    assert [e["event"] for e in events][:2] == ["Run.Ingested", "Run.Attested"]
    assert all(e["verified"] for e in events)
    assert printed["history"].count("✓ verified") == len(events)
    assert "FAILED" not in printed["history"]
    record = json.loads(printed["show --json"])
    assert record["name"] == SEED and record["shownEventsVerified"]
    assert "the 2 read for this record verified" in printed["show"]
    assert "compare with #1" in printed["show"]


def test_search_reads_through_the_driver_alone(demo: dict[str, str], tmp_path: Path) -> None:
    """``search`` (the table and ``--json``) on fresh views reads them through ``sqlite3``
    (issue 33): no SQLAlchemy, eventsourcing, Litestar or psycopg, none of the views' Core
    modules, no event store and no ledger application is loaded."""
    rebuild = [*KERNELINDEX, "projections", "rebuild"]  # views folded: reads only read
    subprocess.run(rebuild, env=demo, cwd=REPO, check=True, capture_output=True)
    printed = {}
    for argv in (["search", "B200", "--json"], ["search", "B200"]):
        done, loaded = _imported(argv, tmp_path, demo)
        assert done.returncode == 0, done.stderr[-2000:]
        stack = {
            m
            for m in loaded
            if m.split(".")[0]
            in {"sqlalchemy", "eventsourcing", "eventsourcing_sqlalchemy", "litestar", "psycopg"}
            or m
            in {
                "projections.tables",
                "projections.queries",
                "projections.view_queries",
                "ledger.store.event_store",
                "api.service.freshness",
                "api.service.search",
            }
            or m.startswith(("ledger.application", "api.cli.service"))
        }
        assert stack == set(), argv
        # It did read the views: the door's reads of them are loaded; no other feature's.
        assert {"projections.search_index", "api.service.driver_search"} <= loaded, argv
        others = {"runs", "boards", "history", "log", "export", "registry", "records", "admin"}
        assert not {f"api.service.{name}" for name in others | {"jobs"}} & loaded, argv
        other_commands = {e.module for c, e in COMMANDS.items() if c != "search"}
        assert not (other_commands - {COMMANDS["search"].module}) & loaded, argv
        printed[len(argv)] = done.stdout
    found = json.loads(printed[3])
    assert found["total"] == 2 and {g["product"] for g in found["items"]} == {"NVIDIA B200"}
    assert printed[2].startswith("2 comparison groups match 'B200'")
