"""ruff and mypy --strict on the packages are part of the test run, so CI enforces them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; install the dev extra: pip install -e '.[dev]'")
    return found


def test_ruff_is_clean() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "."], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = subprocess.run([_tool("mypy")], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pycuda_is_imported_only_by_the_gpu_backends() -> None:
    offenders = [
        str(path.relative_to(REPO))
        for package in ("domain", "ledger", "projections", "gpu_agent", "api")
        for path in (REPO / package).rglob("*.py")
        if "pycuda" in path.read_text("utf-8")
        and not path.is_relative_to(REPO / "gpu_agent" / "backends")
    ]
    assert offenders == []


def _imports(path: Path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text("utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_domain_is_pure() -> None:
    """docs/design.md §2: domain imports no database, web, CLI or CUDA code, and no other layer."""
    forbidden = {
        "sqlalchemy",
        "eventsourcing",
        "eventsourcing_sqlalchemy",
        "psycopg",
        "litestar",
        "uvicorn",
        "typer",
        "rich",
        "pycuda",
        "ledger",
        "projections",
        "api",
        "gpu_agent",
    }
    offenders = {
        str(path.relative_to(REPO)): sorted(_imports(path) & forbidden)
        for path in (REPO / "domain").rglob("*.py")
        if _imports(path) & forbidden
    }
    assert offenders == {}


def test_no_product_module_imports_pydantic() -> None:
    """The manifest and statement models are msgspec Structs (issues 33 and 36): no product
    module imports pydantic, so verify, show and ingest never load it for a model. (The
    pydantic models live on only as the tests' oracles, ``tests/domain/pydantic_*_oracle.py``.)"""
    offenders = [
        str(path.relative_to(REPO))
        for package in ("domain", "ledger", "projections", "gpu_agent", "api")
        for path in (REPO / package).rglob("*.py")
        if _imports(path) & {"pydantic", "pydantic_core", "annotated_types"}
    ]
    assert offenders == []


def test_the_cli_runs_without_the_agent_extra() -> None:
    """README command 1 installs the ledger without numpy/PyCUDA: the CLI must still start,
    and the agent command still say how it is used."""
    for argv in (["--help"], ["agent", "--help"]):
        blocked = (
            "import sys; sys.modules['numpy'] = None; sys.modules['ml_dtypes'] = None; "
            f"sys.argv = ['kernelindex', *{argv!r}]; from api.cli.main import main; main()"
        )
        result = subprocess.run(
            [sys.executable, "-c", blocked], capture_output=True, text=True, check=False, cwd=REPO
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert "agent" in result.stdout


def test_the_offline_verifier_and_the_authority_load_no_database_code() -> None:
    """docs/design.md §2: ``ledger.verify`` (and the one authorization rule it shares with
    admission) is pure: importing it loads no SQLAlchemy, eventsourcing, web or projection
    module, so a verifier needs none of them and its worker processes start light."""
    probe = (
        "import sys, ledger.verify, ledger.authority; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'sqlalchemy', 'eventsourcing', 'eventsourcing_sqlalchemy', 'psycopg', 'litestar', "
        "'projections', 'api'} or m in {'ledger.application', 'ledger.aggregates'}); "
        "print(' '.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == ""


def test_the_cli_verify_path_loads_no_database_code() -> None:
    """``kernelindex verify`` needs no database: the CLI's entry point, the verify command's
    module and the command Typer builds from it load no SQLAlchemy, eventsourcing, web,
    store or read-model module (tests/cli/test_cli_start.py runs the command itself)."""
    probe = (
        "import sys, typer.main, api.cli.main, api.cli.verify; "
        "typer.main.get_group(api.cli.verify.app); "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'sqlalchemy', 'eventsourcing', 'eventsourcing_sqlalchemy', 'psycopg', 'litestar', "
        "'uvicorn', 'projections'} or m.startswith(('ledger.store', 'ledger.application', "
        "'ledger.aggregates'))); print(' '.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == ""


def test_a_read_only_command_loads_no_writer() -> None:
    """``kernelindex show``, ``leaderboard`` and ``history`` open the ledger read-only: the
    writing persistence (eventsourcing-sqlalchemy and its ORM, ``ledger.store.batched_writes``)
    is named by a string and loaded only by a ledger that writes (start-up budget, §13)."""
    probe = (
        "import sys, api.cli.main, api.cli.runs, api.cli.boards, ledger.application; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'eventsourcing_sqlalchemy' "
        "or m == 'ledger.store.batched_writes'); print(' '.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == ""


# Arrows point inward (docs/design.md §2): what each outer package may not import.
# The one known exception is named with its reason, so a new one fails here.
_LAYERS: dict[str, set[str]] = {
    "ledger": {"projections", "api", "gpu_agent", "litestar", "uvicorn", "typer"},
    "projections": {"api", "gpu_agent", "litestar", "uvicorn", "typer"},
    "gpu_agent": {"api", "projections", "litestar", "uvicorn", "sqlalchemy", "eventsourcing"},
}
_KNOWN_BACK_ARROWS: dict[str, list[str]] = {}


def _modules(path: Path) -> set[str]:
    """Every absolute module name a file imports (``from a.b import c`` gives ``a.b``)."""
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


# Inside ``ledger``: the pure parts (proofs, signing) import no database code and, of the
# ledger, only each other and its error types; the agent (a client) imports only signing.
_PURE_LEDGER_PARTS = ("ledger/proofs", "ledger/signing")
_PURE_MAY_IMPORT = ("ledger.proofs", "ledger.signing", "ledger.errors")
_DATABASE = {"sqlalchemy", "eventsourcing", "eventsourcing_sqlalchemy", "psycopg", "sqlite3"}


def test_the_ledgers_pure_parts_import_no_database_code_and_only_each_other() -> None:
    found = {
        str(path.relative_to(REPO)): sorted(
            m
            for m in _modules(path)
            if m.split(".")[0] in _DATABASE
            or (m.split(".")[0] == "ledger" and not m.startswith(_PURE_MAY_IMPORT))
        )
        for part in _PURE_LEDGER_PARTS
        for path in (REPO / part).rglob("*.py")
    }
    assert {k: v for k, v in found.items() if v} == {}
    assert len(found) >= 8  # the parts exist where this test looks


def test_the_agent_imports_only_the_ledgers_signing() -> None:
    found = {
        str(path.relative_to(REPO)): sorted(
            m
            for m in _modules(path)
            if m.split(".")[0] == "ledger" and not m.startswith("ledger.signing")
        )
        for path in (REPO / "gpu_agent").rglob("*.py")
    }
    assert {k: v for k, v in found.items() if v} == {}


def test_imports_point_inward() -> None:
    found = {
        str(path.relative_to(REPO)): sorted(_imports(path) & forbidden)
        for package, forbidden in _LAYERS.items()
        for path in (REPO / package).rglob("*.py")
        if _imports(path) & forbidden
    }
    assert found == _KNOWN_BACK_ARROWS


# Inside ``api``: the HTTP face reads and writes through the one service (api/service), never
# below it (the CLI's rule, with its named exceptions: tests/cli/test_cli_over_the_service.py);
# the service is plain Python every face calls: it imports no face and no face's framework.
_FACE_RULES: dict[str, tuple[str, ...]] = {
    "api/server": ("projections", "ledger.store", "api.cli"),
    "api/service": ("api.server", "api.cli", "litestar", "typer", "uvicorn", "rich"),
}


def test_the_faces_go_through_the_service_and_the_service_through_no_face() -> None:
    found = {
        str(path.relative_to(REPO)): bad
        for folder, forbidden in _FACE_RULES.items()
        for path in (REPO / folder).rglob("*.py")
        if (
            bad := sorted(
                m for m in _modules(path) if any(m == f or m.startswith(f + ".") for f in forbidden)
            )
        )
    }
    assert found == {}


# How big a product module may grow, and how many type checks it may switch off.
_PRODUCT = ("api", "domain", "ledger", "projections", "gpu_agent")
MAX_MODULE_LINES = 500
MAX_TYPE_IGNORES = 9  # the issue: "under 10"


def test_no_product_module_is_over_500_lines_and_type_ignores_stay_few() -> None:
    files = [p for package in _PRODUCT for p in (REPO / package).rglob("*.py")]
    long = {
        str(p.relative_to(REPO)): n
        for p in files
        if (n := len(p.read_text("utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
    ignores = [
        f"{p.relative_to(REPO)}:{i}"
        for p in files
        for i, line in enumerate(p.read_text("utf-8").splitlines(), start=1)
        if "type: ignore" in line
    ]
    assert len(ignores) <= MAX_TYPE_IGNORES, ignores


def _ledger_modules_named(path: Path) -> set[str]:
    """Every ``ledger`` module a file imports, however spelled: ``import ledger.x``,
    ``from ledger.x import y``, ``from ledger import x`` and relative imports."""
    import ast

    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return {n for n in names if n.split(".")[0] == "ledger"}


def test_the_store_imports_neither_the_application_nor_the_aggregates() -> None:
    """``ledger/store`` is the persistence under the application: it imports no
    ``ledger.application`` or ``ledger.aggregates`` module (a stored topic string such as
    ``"ledger.aggregates:Run.Ingested"`` is data, not an import)."""
    found = {
        str(path.relative_to(REPO)): sorted(
            m
            for m in _ledger_modules_named(path)
            if m in {"ledger.application", "ledger.aggregates"}
            or m.startswith(("ledger.application.", "ledger.aggregates."))
        )
        for path in (REPO / "ledger" / "store").rglob("*.py")
    }
    assert {k: v for k, v in found.items() if v} == {}
    assert len(found) >= 5  # the store exists where this test looks
