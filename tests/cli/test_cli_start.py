"""The CLI loads only the module of the command it runs (issue 14: read commands start fast)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer

from api.cli import COMMANDS, build_app

REPO = Path(__file__).resolve().parents[2]
SEED = "sol-submission-38823"  # the demo's seed run, by name


def _names(app: typer.Typer) -> list[str]:
    commands = [
        c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands
    ]
    groups = [g.name or "" for g in app.registered_groups]
    return [n.replace("_", "-") for n in commands + groups]


def test_each_module_registers_exactly_the_commands_the_table_gives_it() -> None:
    for module in dict.fromkeys(COMMANDS.values()):
        app = typer.Typer()
        importlib.import_module(module).register(app)
        assert sorted(_names(app)) == sorted(c for c, m in COMMANDS.items() if m == module)


def test_help_lists_every_command_and_one_command_builds_only_its_module() -> None:
    assert sorted(_names(build_app())) == sorted(COMMANDS)
    assert sorted(_names(build_app(["show", "run", "--home", "x"]))) == sorted(
        c for c, m in COMMANDS.items() if m == "api.cli_runs"
    )
    assert sorted(_names(build_app(["no-such-command"]))) == sorted(COMMANDS)


def _loaded_by(argv: list[str]) -> set[str]:
    probe = (
        "import sys; from api.cli import build_app; "
        f"build_app({argv!r}); print(' '.join(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    return set(result.stdout.split())


def test_read_commands_load_no_importer_server_or_agent_module() -> None:
    for command in ("show", "history", "leaderboard", "search"):
        loaded = _loaded_by([command, "x"])
        heavy = {
            m
            for m in loaded
            if m.split(".")[0] in {"litestar", "uvicorn", "gpu_agent"}
            or m.startswith(("domain.importers.sol_", "domain.importers.flashinfer", "api.server"))
            or m == "domain.manifests.models"  # built on first validation only
        }
        assert heavy == set(), command


def test_read_commands_open_the_ledger_without_eventsourcing_sqlalchemy(tmp_path: Path) -> None:
    """show, history, leaderboard and search read through ledger/store/read_only.py: the writers'
    persistence module (and the SQL dialects its sqlalchemy_utils loads) is never imported,
    nor SQLAlchemy's ORM (the read store and the read models use Core only)."""
    env = {
        **os.environ,
        "KERNELINDEX_HOME": str(tmp_path / "home"),
        "KERNELINDEX_DB": f"sqlite:///{tmp_path / 'ledger.db'}",
    }
    demo = ["demo", "--home", env["KERNELINDEX_HOME"], "--db", env["KERNELINDEX_DB"]]
    subprocess.run(
        [sys.executable, "-m", "api.cli", *demo],
        env=env,
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    probe = (
        "import sys; from api.cli import build_app; argv = sys.argv[1:]\n"
        "code = build_app(argv)(argv, standalone_mode=False)\n"
        "print('LOADED', ' '.join(sorted(sys.modules)))\n"
        "sys.exit(code if isinstance(code, int) else 0)"
    )
    for argv in (
        ["show", SEED],
        ["history", SEED],
        ["leaderboard", "--gpu", "NVIDIA B200"],
        ["search", "B200"],
    ):
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        loaded = set(done.stdout.rsplit("LOADED", 1)[1].split())
        assert "ledger.store.read_only" in loaded, argv
        assert not {"eventsourcing_sqlalchemy", "sqlalchemy_utils", "sqlalchemy.orm"} & loaded, argv


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
    main = [sys.executable, "-m", "api.cli"]

    def run(*argv: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*main, *argv], env=env, cwd=REPO, capture_output=True, text=True, check=False, **kw
        )

    init = run("init", "--json")
    assert init.returncode == 0 and json.loads(init.stdout)["keys"]["admin"]
    missing = run("show", "no-such-run")
    assert missing.returncode == 1 and "error[not-found]" in missing.stderr
    usage = run("show")
    assert usage.returncode == 2 and "Missing argument" in usage.stderr
    listed = run("keys", "list", "--json")
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 3  # all of it flushed
    closed = subprocess.run(
        [*main, "keys", "list"], env=env, cwd=REPO, stdout=subprocess.DEVNULL, check=False
    )
    assert closed.returncode == 0
