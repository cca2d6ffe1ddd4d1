"""Every command that writes a file writes it whole or not at all (issue 34 item 8).

The sweep runs each file-writing command twice over one ledger: once as it is (it writes
its files), once with the file system failing as the finished file is put in place (a full
disk, an interrupted rename). The failure must be a clear refusal that leaves the folder as
it was: no partial file, no temporary folder, a file held before unchanged. A command that
wrote its file any other way than through ``api.cli.files`` would leave it behind. And a
scan of the CLI's modules finds no file written past ``api.cli.files``. On SQLite and
PostgreSQL.
"""

from __future__ import annotations

import ast
import errno
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_session import Cli
from live_server import live_server
from served_app import TEST_CONFIG

import api.cli.files
from api.server.app import create_app
from ledger.home import LedgerHome

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
GROUP = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"
CLI = Path(__file__).resolve().parents[2] / "api" / "cli"

# A command's arguments, given the folder it writes to.
Argv = Callable[[Path], list[object]]
# Commands that never replace a file there (a key): run again, they refuse or only read it.
KEEPS = {"keys generate", "witness key"}


@pytest.fixture
def served(tmp_path: Path, db_url: str, shared: Path) -> Iterator[tuple[Cli, str]]:
    """The demo ledger with an import (stored artifacts), and a server over it."""
    cli = Cli(tmp_path / "home", db_url)
    cli("demo", "--home", cli.home, "--db", db_url)
    cli("import", "sol-leaderboard", shared / "fixtures/sol-leaderboard")
    ledger = LedgerHome.at(cli.home, db_url).open()
    try:
        with live_server(create_app(ledger, TEST_CONFIG)) as server:
            yield cli, server.url
    finally:
        ledger.close()


def _stored_artifact(cli: Cli) -> str:
    board = cli.json("leaderboard", "--gpu", "NVIDIA B200")["groups"][0]
    for entry in board["entries"]:
        for artifact in cli.json("show", entry["run"])["artifacts"]:
            if artifact["stored"]:
                return str(artifact["digest"])
    raise AssertionError("the import stores no artifact")


def _commands(cli: Cli, url: str, tmp_path: Path) -> dict[str, tuple[Argv, list[str]]]:
    """Each file-writing command: its arguments, and the files it writes (in its folder)."""
    bundle = tmp_path / "seed.bundle"
    cli("export", "--run", SEED, "-o", bundle)
    artifact = _stored_artifact(cli)
    root = cli.home / "trust-root.json"
    return {
        "export --run": (lambda o: ["export", "--run", SEED[:15], "-o", o / "r.b"], ["r.b"]),
        "export --cohort": (lambda o: ["export", "--cohort", GROUP[:15], "-o", o / "g.b"], ["g.b"]),
        "export --all": (lambda o: ["export", "--all", "-o", o / "all.b"], ["all.b"]),
        "export --all --jsonl": (
            lambda o: ["export", "--all", "--jsonl", "-o", o / "reg.jsonl"],
            ["reg.jsonl", "reg.jsonl.checkpoint"],
        ),
        "artifact get -o": (lambda o: ["artifact", "get", artifact, "-o", o / "a"], ["a"]),
        "keys generate": (lambda o: ["keys", "generate", o / "k.pem"], ["k.pem", "k.pem.pub"]),
        "witness key": (lambda o: ["witness", "key", "--name", "w", o / "w.key"], ["w.key"]),
        "witness proofs": (
            lambda o: ["witness", "proofs", bundle, "-o", o / "proofs"],
            ["proofs"],
        ),
        "history --server --checkpoint": (
            lambda o: [
                "history",
                SEED,
                "--server",
                url,
                "--trust-root",
                root,
                "--checkpoint",
                o / "held.note",
            ],
            ["held.note"],
        ),
    }


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) and its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_every_file_writing_command_failing_midway_leaves_the_folder_as_it_was(
    served: tuple[Cli, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli, url = served
    commands = _commands(cli, url, tmp_path)

    def disk_full(written: Path, path: Path, *, replace: bool) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    for name, (argv, files) in commands.items():
        folder = tmp_path / name.replace(" ", "_")
        folder.mkdir()
        # As it is: the command writes its files.
        cli(*argv(folder))
        assert sorted(p.name for p in folder.iterdir()) == sorted(files), name
        held = _tree(folder)
        assert held, name
        # Failing as the first finished file is put in place: a refusal, nothing changed.
        with monkeypatch.context() as patched:
            patched.setattr(api.cli.files, "put_in_place", disk_full)
            for target in (folder, tmp_path / f"{folder.name}-new"):
                target.mkdir(exist_ok=True)
                before = _tree(target)
                if target == folder and name in KEEPS:
                    cli(*argv(target), ok=name == "witness key")  # reads the key it finds
                else:
                    refused = cli(*argv(target), ok=False)
                    assert refused.exit_code == 1, (name, refused.output)
                    assert "error[io]" in refused.stderr, (name, refused.stderr)
                    assert "No space left on device" in refused.stderr, name
                assert _tree(target) == before, name
                # No temporary file or folder is left beside the target either.
                assert not [p for p in target.rglob("*") if ".partial" in p.name], name


# What writes a file, and the helpers of api.cli.files a write must go through.
WRITES = {"write_text", "write_bytes", "save", "open", "mkdir", "touch", "symlink_to"}
WHOLE = {"written_whole", "written_into"}


def _unsafe_writes(source: str) -> list[str]:
    """Calls that write a file to a path not given by ``written_whole``/``written_into``
    (``with ... as partial``); ``mkdir`` of a folder, and reading opens, are no writes."""
    tree = ast.parse(source)
    staged: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Name)
                    and call.func.id in WHOLE
                    and isinstance(item.optional_vars, ast.Name)
                ):
                    staged.add(item.optional_vars.id)
    found: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method = node.func.attr
        if method not in WRITES or method == "mkdir":
            continue
        if method == "open" and not any(
            isinstance(a, ast.Constant) and isinstance(a.value, str) and set(a.value) & set("wax+")
            for a in node.args
        ):
            continue  # opened to read
        # A key's save writes to its argument; the others, to the path they are called on.
        target = (node.args[0] if node.args else None) if method == "save" else node.func.value
        if not (isinstance(target, ast.Name) and target.id in staged):
            found.append(f"{method} at line {node.lineno}")
    return found


def test_no_command_module_writes_a_file_past_api_cli_files() -> None:
    modules = sorted(p for p in CLI.glob("*.py") if p.name != "files.py")
    found = {p.name: _unsafe_writes(p.read_text("utf-8")) for p in modules}
    assert {name: f for name, f in found.items() if f} == {}


def test_the_scan_finds_a_file_written_directly() -> None:
    direct = (
        "def f(path, key):\n"
        "    path.write_text('x')\n"
        "    key.save(path)\n"
        "    with path.open('w') as h:\n"
        "        h.write('x')\n"
        "    with written_whole(path) as partial:\n"
        "        partial.write_bytes(b'x')\n"
        "        key.save(partial)\n"
        "    path.open('rb')\n"
    )
    assert _unsafe_writes(direct) == ["write_text at line 2", "save at line 3", "open at line 4"]


def test_export_checks_its_arguments_before_anything_is_written(
    tmp_path: Path, db_url: str
) -> None:
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    out = tmp_path / "out"
    out.mkdir()
    events = cli.event_count()
    for argv, says in (
        (["--run", SEED, "--all"], "give one of"),
        (["--run", SEED, "--jsonl"], "--jsonl goes with --all"),
        (["--all", "--jsonl", "--size", "1"], "go with a bundle"),
    ):
        refused = cli("export", *argv, "-o", out / "x", ok=False)
        assert refused.exit_code == 1 and says in refused.stderr, argv
    assert list(out.iterdir()) == []
    assert cli.event_count() == events
