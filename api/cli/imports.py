"""`kernelindex import ...`: bringing a source's published results in."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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
from domain.importers.flashinfer_trace import map_flashinfer_trace
from domain.importers.gpumode import map_gpumode, parse_leaderboards
from domain.importers.kernelindex_catalog import map_kernelindex_catalog
from domain.importers.records import ImportRecord, Rejection
from domain.importers.sol_execbench import map_sol_execbench, map_sol_execbench_solutions
from domain.importers.sol_leaderboard import map_sol_leaderboard
from ledger.errors import NotFoundError
from ledger.home import LedgerHome

if TYPE_CHECKING:
    from ledger.importing import ImportSummary

import_app = typer.Typer(
    help="Import results from a source's saved responses.", no_args_is_help=True
)
app = typer.Typer()
app.add_typer(import_app, name="import")
MAX_INPUT_FILE = 64 * 1024 * 1024

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
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs
    from api.service.imports import import_records  # noqa: PLC0415

    with (
        local_service(home, db, read_only=False) as service,
        Progress(
            SpinnerColumn(),
            TextColumn("[bold]importing[/] {task.description}"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        ) as bar,
    ):
        task = bar.add_task("", total=None)

        def show(s: ImportSummary) -> None:
            bar.update(
                task,
                description=f"{s.new} new, {s.unchanged} unchanged, {s.superseded} superseded, "
                f"{len(s.rejected)} rejected",
            )

        summary = import_records(service, LedgerHome.at(home, db), items, show)
    _print_summary(summary, as_json)


def _print_summary(summary: ImportSummary, as_json: bool) -> None:
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
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs
    from api.service.imports import keep_solutions  # noqa: PLC0415

    with local_service(home, db, read_only=False) as service:
        kept = keep_solutions(service, map_sol_execbench_solutions(files, extra))
    if not as_json:
        out.print(f"solutions kept as artifacts: {kept.kept}")
        for problem in kept.refused:
            out.print(f"[yellow]solution rejected[/]: {escape(problem.reason)}")
    _run_import(home, db, map_sol_execbench(files), as_json)


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
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs
    from api.service.imports import keep_manifests, keep_projects  # noqa: PLC0415

    with local_service(home, db, read_only=False) as service:
        kept = keep_manifests(service, _catalog_lines(file))
        keep_projects(service, _catalog_lines(file))
    if not as_json:
        out.print(f"catalog manifests kept as artifacts: {kept.kept} ({len(kept.refused)} refused)")
        for rejection in kept.refused[:20]:
            out.print(
                f"[yellow]manifest rejected[/] {escape(str(rejection.external_id))}: "
                f"{escape(rejection.reason)}"
            )
    _run_import(home, db, map_kernelindex_catalog(_catalog_lines(file)), as_json)


def _catalog_lines(file: Path) -> Iterable[bytes]:
    return _zstd_lines(file) if file.suffix == ".zst" else file.open("rb")
