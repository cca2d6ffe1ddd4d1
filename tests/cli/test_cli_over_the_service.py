"""The CLI is a face over the one service (issue 33): its command modules import neither the
read models (``projections``) nor the store (``ledger.store``), build no ``ProjectionRunner``
and open no session; they ask ``api.service`` (through ``api.cli.service``). The modules
that still reach below the service are named here with the reason, so that a new one fails
and a fixed one has to leave the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "api" / "cli"
BELOW_THE_SERVICE = ("projections", "ledger.store")

# Module → why it still reaches below the service.
KNOWN: dict[str, str] = {
    "db.py": "the schema's own commands: status and upgrade of the store's and views' tables",
    "views.py": "`projections rebuild` and `status`: the read models' own maintenance",
    "workers.py": "the projector and the sequencer: the workers that fold and sequence",
    "home.py": "`init` makes the views' tables (projections.runner.prepare_views)",
    "imports.py": "stores the sources' records as artifacts (the service writes no artifact)",
    "export.py": "writes a bundle to a file with its progress, of the whole ledger too, "
    "against held notes (the service answers a run's or a group's bundle as text only)",
}


def _imported(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _below(path: Path) -> list[str]:
    text = path.read_text("utf-8")
    found = sorted(
        m
        for m in _imported(path)
        if any(m == b or m.startswith(b + ".") for b in BELOW_THE_SERVICE)
    )
    found += [word for word in ("ProjectionRunner(", ".transaction(") if word in text]
    return found


def test_the_commands_ask_the_service_not_the_store_or_the_read_models() -> None:
    modules = sorted(p for p in CLI.glob("*.py") if p.name != "witness.py")
    assert len(modules) >= 20  # the CLI is where this test looks
    found = {p.name: _below(p) for p in modules}
    assert {name: f for name, f in found.items() if f and name not in KNOWN} == {}
    # Each exception is still one: a module that no longer reaches below leaves the list.
    assert {name for name in KNOWN if not found.get(name)} == set()


def test_the_read_commands_modules_are_among_those_that_ask_the_service() -> None:
    for name in ("runs.py", "boards.py", "keys.py", "log.py", "artifacts.py", "statements.py"):
        assert "api.cli.service" in _imported(CLI / name), name
