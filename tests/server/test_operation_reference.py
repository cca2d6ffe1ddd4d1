"""An operation page shows the reference implementation the source's definition gives: the
code itself, escaped, in its own box, on the page and in ``GET /v1/operations/{name}``; read
from the definition the import kept (FlashInfer-Bench: inside the rerun workload artifact;
SOL-ExecBench: the definition stored beside its solutions), and only from a definition that
maps to the spec shown (issue 34)."""

from __future__ import annotations

import html
import json
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient
from sqlalchemy import create_engine, delete, select

from api.server.app import create_app
from api.service.ledger_service import LedgerService
from domain.importers.records import WORKLOAD_MEDIA_TYPE, definition_artifact
from ledger.home import LedgerHome
from ledger.store.artifacts import ArtifactStore, artifacts
from tests.cli_session import Cli
from tests.served_app import TEST_CONFIG
from tests.sol_traces import SOL_EXAMPLES, definition_of, traced_folder

FLASHINFER_OPERATION = "fused_add_rmsnorm_h2048"
# Markup in code must reach the reader as the characters it is, never as markup.
HOSTILE = '\n# if a < b and c > d: s = "&amp; </code></pre><script>alert(1)</script>"\n'

Served = Callable[..., Any]


def _code_box(page: str) -> str:
    found = re.search(r'<pre class="code reference-code"[^>]*><code>(.*?)</code></pre>', page, re.S)
    assert found is not None, "no reference code box on the page"
    return found.group(1)


def _with_reference(folder: Path, reference: str, name: str | None = None) -> None:
    definition = json.loads((folder / "definition.json").read_text())
    definition["reference"] = reference
    if name is not None:
        definition["name"] = name
    (folder / "definition.json").write_text(json.dumps(definition))


@pytest.fixture
def ledger_of(db_url: str, tmp_path: Path) -> Iterator[Served]:
    """A ledger with the given imports, served."""
    opened: list[Any] = []

    @contextmanager
    def serve(*imports: tuple[str, Path]) -> Iterator[TestClient[Any]]:
        cli = Cli(tmp_path / "home", db_url)
        cli("init")
        for kind, folder in imports:
            cli("import", kind, folder)
        ledger = LedgerHome.at(tmp_path / "home", db_url).open()
        opened.append(ledger)
        with TestClient(create_app(ledger, TEST_CONFIG)) as client:
            yield client

    yield serve
    for ledger in opened:
        ledger.close()


def _flashinfer(tmp_path: Path, shared: Path) -> Path:
    folder = Path(shutil.copytree(shared / "fixtures/flashinfer-trace", tmp_path / "fi"))
    definition = json.loads((folder / "definition.json").read_text())
    _with_reference(folder, definition["reference"] + HOSTILE)
    return folder


def test_the_operation_page_shows_the_definitions_reference_code_escaped(
    ledger_of: Served, tmp_path: Path, shared: Path
) -> None:
    folder = _flashinfer(tmp_path, shared)
    code = json.loads((folder / "definition.json").read_text())["reference"]
    with ledger_of(("flashinfer-trace", folder)) as client:
        about = client.get(f"/v1/operations/{FLASHINFER_OPERATION}").json()["about"]
        assert about["referenceCode"] == code
        artifact = client.get(f"/v1/artifacts/{about['referenceArtifact']}")
        assert artifact.status_code == 200
        assert json.loads(artifact.content)["definition"]["reference"] == code

        page = client.get(f"/operations/{FLASHINFER_OPERATION}")
        assert page.status_code == 200
        assert "<script>alert" not in page.text
        assert html.unescape(_code_box(page.text)) == code


def _names(db_url: str) -> set[str]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return {str(n) for (n,) in conn.execute(select(artifacts.c.name))}
    finally:
        engine.dispose()


def test_a_definition_that_maps_to_another_spec_is_not_shown(
    ledger_of: Served, tmp_path: Path, shared: Path, db_url: str
) -> None:
    """A SOL-ExecBench definition given the FlashInfer operation's name is kept (and found
    first, by that name), but it is another operation: its code is not this one's."""
    folder = _flashinfer(tmp_path, shared)
    code = json.loads((folder / "definition.json").read_text())["reference"]
    other = Path(shutil.copytree(SOL_EXAMPLES / "cuda_cpp-rmsnorm", tmp_path / "sol"))
    _with_reference(other, "# not this operation's reference\n", name=FLASHINFER_OPERATION)
    solution = json.loads((other / "solution_cuda.json").read_text())
    (other / "solution_cuda.json").write_text(
        json.dumps(solution | {"definition": FLASHINFER_OPERATION})
    )
    with ledger_of(("sol-execbench", other), ("flashinfer-trace", folder)) as client:
        assert f"{FLASHINFER_OPERATION.replace('_', '-')}.definition.json" in _names(db_url)
        about = client.get(f"/v1/operations/{FLASHINFER_OPERATION}").json()["about"]
        assert about["referenceCode"] == code


def test_a_sol_execbench_run_shows_its_definitions_reference(
    ledger_of: Served, tmp_path: Path
) -> None:
    folder = traced_folder("cuda_cpp-rmsnorm", tmp_path)
    definition = definition_of("cuda_cpp-rmsnorm")
    with ledger_of(("sol-execbench", folder)) as client:
        about = client.get(f"/v1/operations/{definition['name']}").json()["about"]
        assert about["referenceCode"] == definition["reference"]
        # The definition kept whole, beside the solution (not only inside a rerun workload).
        kept = client.get(f"/v1/artifacts/{about['referenceArtifact']}")
        assert json.loads(kept.content) == definition
        page = client.get(f"/operations/{definition['name']}")
        assert html.unescape(_code_box(page.text)) == definition["reference"]


def test_a_definition_stored_later_is_shown_without_a_restart(
    ledger_of: Served, tmp_path: Path, shared: Path, db_url: str
) -> None:
    """A ledger whose definition was not kept (its rerun workloads removed, as on a ledger
    imported before definitions were) shows no code; once the definition is stored, the
    service's next answer shows it: what was found is kept only while the artifacts stay as
    they were. (The HTTP layer keeps a whole answer per views position; an import that stores
    a definition with its runs moves that.)"""
    folder = _flashinfer(tmp_path, shared)
    definition = json.loads((folder / "definition.json").read_text())
    with ledger_of(("flashinfer-trace", folder)):
        engine = create_engine(db_url)
        try:
            with engine.begin() as conn:
                conn.execute(delete(artifacts).where(artifacts.c.media_type == WORKLOAD_MEDIA_TYPE))
        finally:
            engine.dispose()
        ledger = LedgerHome.at(tmp_path / "home", db_url).open()
        try:
            service = LedgerService(ledger)
            for _ in range(2):  # the second answer is the one kept: still none
                about = service.boards.operation(FLASHINFER_OPERATION).about
                assert about is not None and about.reference_code is None
            ArtifactStore(ledger.store).put(definition_artifact(definition))
            about = service.boards.operation(FLASHINFER_OPERATION).about
            assert about is not None and about.reference_code == definition["reference"]
        finally:
            ledger.close()
