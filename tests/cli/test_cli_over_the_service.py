"""The CLI is a face over the one service (issue 33): its command modules import neither the
read models (``projections``) nor the store (``ledger.store``), build no ``ProjectionRunner``
and open no session; they ask ``api.service`` (through ``api.cli.service``). The rule holds
for every command module: the schema's and the views' maintenance, the workers, the imports
and the exports ask the service too (``LedgerService.admin``, ``api.service.imports``,
``LedgerService.log.export``).
"""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "api" / "cli"
BELOW_THE_SERVICE = ("projections", "ledger.store")


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
    modules = sorted(CLI.glob("*.py"))
    assert len(modules) >= 20  # the CLI is where this test looks
    found = {p.name: _below(p) for p in modules}
    assert {name: f for name, f in found.items() if f} == {}


def test_the_check_sees_a_module_that_reaches_below(tmp_path: Path) -> None:
    # The rule's own check, on a module written as the old export was.
    module = tmp_path / "old.py"
    module.write_text(
        "def f():\n    from projections.export import export_runs\n"
        "    from ledger.store.log_queries import held_checkpoint_size\n"
        "    with ledger.store.transaction(commit=False):\n        pass\n",
        "utf-8",
    )
    assert _below(module) == ["ledger.store.log_queries", "projections.export", ".transaction("]


def test_the_read_commands_modules_are_among_those_that_ask_the_service() -> None:
    for name in (
        "runs.py",
        "boards.py",
        "keys.py",
        "log.py",
        "artifacts.py",
        "statements.py",
        "views.py",
        "workers.py",
        "imports.py",
        "export.py",
    ):
        assert "api.cli.service" in _imported(CLI / name), name
