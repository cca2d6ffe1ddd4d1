"""`kernelindex import ...`: bringing a source's published results in."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated

import typer
import zstandard
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from api.cli.common import (
    DbOption,
    HomeOption,
    JsonOption,
    err,
    handles_errors,
    out,
    print_json,
)
from api.run_intake import held_manifests
from domain.canonical import canonical_json
from domain.importers.flashinfer_trace import map_flashinfer_trace
from domain.importers.gpumode import map_gpumode, parse_leaderboards
from domain.importers.kernelindex_catalog import catalog_manifests, map_kernelindex_catalog
from domain.importers.records import Artifact, ImportRecord, Rejection
from domain.importers.sol_execbench import (
    MappedSolution,
    map_sol_execbench,
    map_sol_execbench_solutions,
)
from domain.importers.sol_leaderboard import map_sol_leaderboard
from ledger.errors import NotFoundError
from ledger.home import LedgerHome
from ledger.importing import Importer, ImportSummary
from ledger.store.artifacts import ArtifactStore

import_app = typer.Typer(
    help="Import results from a source's saved responses.", no_args_is_help=True
)
app = typer.Typer()
app.add_typer(import_app, name="import")
MAX_INPUT_FILE = 64 * 1024 * 1024
MANIFEST_MEDIA_TYPE = "application/vnd.kernelindex.manifest+json"

Items = Iterable[ImportRecord | Rejection]


def _read_dir(directory: Path) -> dict[str, bytes]:
    if not directory.is_dir():
        raise NotFoundError(f"{directory} is not a folder")
    files = {}
    for path in sorted(directory.iterdir()):
        if path.is_file() and path.suffix in (".json", ".jsonl"):
            if path.stat().st_size > MAX_INPUT_FILE:
                raise NotFoundError(f"{path} is larger than {MAX_INPUT_FILE} bytes")
            files[path.name] = path.read_bytes()
    return files


def _run_import(home: Path | None, db: str | None, items: Items, as_json: bool) -> None:
    target = LedgerHome.at(home, db)
    ledger = target.open()
    importer = Importer(
        ledger,
        target.key("ingester"),
        target.key("admin"),
        held=lambda run, have: held_manifests(ledger, run, have),
    )
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]importing[/] {task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task("", total=None)

        def show(s: ImportSummary) -> None:
            bar.update(
                task,
                description=f"{s.new} new, {s.unchanged} unchanged, {s.superseded} superseded, "
                f"{len(s.rejected)} rejected",
            )

        summary = importer.run(items, progress=show)
    # The views fold what the import added now, once, rather than at the next read.
    from api.cli.service import service_over  # noqa: PLC0415 - the database, when it runs

    with service_over(ledger) as service:
        service.views.position()
    if as_json:
        print_json(summary.to_json())
        return
    table = Table(title="Import", title_justify="left")
    columns = (
        "new",
        "unchanged",
        "superseded",
        "attached",
        "rejected",
        "skipped",
        "events appended",
    )
    for column in columns:
        table.add_column(column, justify="right")
    table.add_row(
        str(summary.new),
        str(summary.unchanged),
        str(summary.superseded),
        str(summary.attached),
        str(len(summary.rejected)),
        str(len(summary.skipped)),
        str(summary.events),
    )
    out.print(table)
    # Every record that made no new run says why (a kept one is counted unchanged).
    for what, reasons in (
        ("rejected", summary.rejected),
        ("kept the held run", summary.kept),
        ("skipped", summary.skipped),
    ):
        for external_id, reason in reasons[:50]:
            named = f" {escape(str(external_id))}" if external_id else ""
            out.print(f"[yellow]{what}[/]{named}: {escape(reason)}")
        if len(reasons) > 50:
            out.print(f"... and {len(reasons) - 50} more {what} (use --json for all)")


@import_app.command("sol-leaderboard")
@handles_errors
def import_sol_leaderboard(
    directory: Annotated[
        Path, typer.Argument(help="Saved /api/kernels, kernel-<id>, submissions responses.")
    ],
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """SOL-ExecBench leaderboard submissions."""
    _run_import(home, db, map_sol_leaderboard(_read_dir(directory)), as_json)


@import_app.command("sol-execbench")
@handles_errors
def import_sol_execbench(
    directory: Annotated[
        Path, typer.Argument(help="A benchmark folder: definition, workload, solutions, traces.")
    ],
    definition: Annotated[
        Path | None,
        typer.Option("--definition", help="definition.json for a folder of solutions only."),
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """A SOL-ExecBench benchmark folder: traces become runs; every solution is kept by digest
    (its implementation manifest and sources) so it can be rerun later."""
    files = _read_dir(directory)
    extra = definition.read_bytes() if definition else None
    kept, problems = _keep_solutions(home, db, map_sol_execbench_solutions(files, extra))
    if not as_json:
        out.print(f"solutions kept as artifacts: {len(kept)}")
        for problem in problems:
            out.print(f"[yellow]solution rejected[/]: {escape(problem)}")
    _run_import(home, db, map_sol_execbench(files), as_json)


def _keep_solutions(
    home: Path | None, db: str | None, solutions: Iterable[MappedSolution | Rejection]
) -> tuple[list[str], list[str]]:
    """Store each solution's sources and implementation manifest; return their digests."""
    store = ArtifactStore(LedgerHome.at(home, db).open().store)
    kept: list[str] = []
    problems: list[str] = []
    for item in solutions:
        if isinstance(item, Rejection):
            problems.append(item.reason)
            continue
        for artifact in item.artifacts:
            store.put(artifact)
        manifest = Artifact(
            canonical_json(item.implementation),
            "application/vnd.kernelindex.manifest+json",
            item.name,
        )
        store.put(manifest)
        kept.append(item.implementation_digest)
    return kept, problems


@import_app.command("flashinfer-trace")
@handles_errors
def import_flashinfer_trace(
    directory: Annotated[
        Path, typer.Argument(help="FlashInfer-Bench definition, solutions and traces.")
    ],
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """FlashInfer-Bench traces."""
    _run_import(home, db, map_flashinfer_trace(_read_dir(directory)), as_json)


@import_app.command("gpumode")
@handles_errors
def import_gpumode(
    file: Annotated[Path, typer.Argument(help="GPU MODE KernelBot leaderboard rows (JSON).")],
    leaderboards: Annotated[
        Path | None,
        typer.Option("--leaderboards", help="leaderboards.json naming the leaderboard ids."),
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """GPU MODE KernelBot leaderboard rows."""
    boards = parse_leaderboards(leaderboards.read_bytes()) if leaderboards else None
    items = map_gpumode(file.read_bytes(), file.name, leaderboards=boards)
    _run_import(home, db, items, as_json)


def _zstd_lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as raw:
        reader = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw))
        yield from reader


@import_app.command("kernelindex-catalog")
@handles_errors
def import_kernelindex_catalog(
    file: Annotated[Path, typer.Argument(help="The public catalog export (.jsonl.zst or .jsonl).")],
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Mirror the public KernelIndex catalog export (every digest recomputed).

    Benchmark runs become signed ingestions; operations, workloads, implementations,
    projects and serving manifests are kept by digest as manifest artifacts."""
    kept, refused = _keep_catalog_manifests(home, db, _catalog_lines(file))
    if not as_json:
        out.print(f"catalog manifests kept as artifacts: {kept} ({len(refused)} refused)")
        for rejection in refused[:20]:
            out.print(
                f"[yellow]manifest rejected[/] {escape(str(rejection.external_id))}: "
                f"{escape(rejection.reason)}"
            )
    _run_import(home, db, map_kernelindex_catalog(_catalog_lines(file)), as_json)


def _catalog_lines(file: Path) -> Iterable[bytes]:
    return _zstd_lines(file) if file.suffix == ".zst" else file.open("rb")


def _keep_catalog_manifests(
    home: Path | None, db: str | None, lines: Iterable[bytes]
) -> tuple[int, list[Rejection]]:
    store = ArtifactStore(LedgerHome.at(home, db).open().store)
    refused: list[Rejection] = []
    kept = 0
    batch: list[Artifact] = []
    for _, manifest in catalog_manifests(lines, rejected=refused):
        batch.append(
            Artifact(canonical_json(manifest), MANIFEST_MEDIA_TYPE, manifest["metadata"]["name"])
        )
        kept += 1
        if len(batch) == 500:
            store.put_many(batch)
            batch = []
    store.put_many(batch)
    return kept, refused
