"""`kernelindex log ...`, `export`, `verify` and `audit`: the transparency side of the CLI."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from api.cli_common import (
    EXIT_REJECTED,
    DbOption,
    HomeOption,
    JsonOption,
    err,
    handles_errors,
    open_ledger,
    out,
    print_json,
)
from ledger.audit import audit_ledger
from ledger.bundle_verifier import verify_bundle_lines
from ledger.claims import ClaimTracker
from ledger.errors import NotFoundError
from ledger.log_queries import checkpoint_json, consistency_json, entries_json, inclusion_json
from ledger.trust import TrustRoot
from ledger.verification_report import Report
from projections.export import export_runs

log_app = typer.Typer(
    help="The transparency log: checkpoints, proofs, entries.", no_args_is_help=True
)

CheckpointOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--checkpoint", help="A signed checkpoint you hold (e.g. from a witness); repeatable."
    ),
]


def _progress(total: int | None, what: str) -> Progress:
    return Progress(
        TextColumn(f"[bold]{what}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


def print_report(report: Report) -> None:
    verdict = "[bold green]VERIFIED[/]" if report.verified else "[bold red]FAILED[/]"
    facts = ", ".join(f"{k} {v}" for k, v in report.facts.items() if not isinstance(v, dict))
    out.print(f"{verdict}  {report.subject}: {escape(facts)}")
    table = Table(title_justify="left")
    table.add_column("check")
    table.add_column("passed", justify="right")
    table.add_column("failed", justify="right")
    for check in sorted(set(report.passed) | set(report.failed)):
        failed = report.failed[check]
        table.add_row(check, str(report.passed[check]), f"[bold red]{failed}[/]" if failed else "0")
    out.print(table)
    for finding in report.findings:
        out.print(f"[red]✗[/] {finding.check} at {escape(finding.where)}: {escape(finding.reason)}")
    for note in report.notes:
        out.print(f"[yellow]note[/]: {escape(note)}")


def _read_notes(paths: list[Path] | None) -> list[str]:
    return [p.read_text("utf-8") for p in paths or []]


def register_log_commands(app: typer.Typer) -> None:
    app.add_typer(log_app, name="log")
    app.command("export")(export)
    app.command("verify")(verify)
    app.command("audit")(audit)


@handles_errors
def export(
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Bundle file to write (JSON Lines).")
    ],
    run: Annotated[
        list[str] | None, typer.Option("--run", help="Run digest or prefix; repeatable.")
    ] = None,
    cohort: Annotated[
        str | None, typer.Option("--cohort", help="A comparison key: every run of the group.")
    ] = None,
    all_events: Annotated[bool, typer.Option("--all", help="The whole ledger.")] = False,
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Write a self-contained bundle that `kernelindex verify` checks offline."""
    if sum((bool(run), bool(cohort), all_events)) != 1:
        raise NotFoundError("give one of --run RUN (repeatable), --cohort KEY or --all")
    ledger = open_ledger(home, db)
    runs = [ledger.resolve_run(r) for r in run] if run else None
    with output.open("w", encoding="utf-8") as handle, _progress(None, "exporting") as bar:
        task = bar.add_task("export", total=None)
        summary = export_runs(
            ledger, handle, runs, cohort=cohort, progress=lambda n: bar.update(task, completed=n)
        )
    err.print(
        f"wrote {output}: {summary.events} events, proofs against a signed checkpoint of "
        f"{summary.tree_size} leaves"
    )


@handles_errors
def verify(
    bundle: Annotated[Path, typer.Argument(help="Bundle from `kernelindex export`.")],
    trust_root: Annotated[
        Path | None,
        typer.Option("--trust-root", help="Pin this trust root instead of the bundle's."),
    ] = None,
    checkpoint: CheckpointOption = None,
    as_json: JsonOption = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Processes that verify events (default: one per CPU core; 1: this one only).",
        ),
    ] = None,
) -> None:
    """Verify a bundle offline: signatures, keys, digests, inclusion proofs, checkpoint, claims."""
    pinned = TrustRoot.load(trust_root) if trust_root else None
    with bundle.open("r", encoding="utf-8") as handle, _progress(None, "verifying") as bar:
        task = bar.add_task("verify", total=None)
        report = verify_bundle_lines(
            handle,
            pinned_root=pinned,
            known_checkpoints=_read_notes(checkpoint),
            progress=lambda n: bar.update(task, completed=n),
            workers=workers,
            claims=ClaimTracker(),
        )
    report.subject = str(bundle)
    if as_json:
        print_json(report.to_json())
    else:
        print_report(report)
    if not report.verified:
        raise typer.Exit(EXIT_REJECTED)


@handles_errors
def audit(
    checkpoint: CheckpointOption = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Recompute every leaf, the tree and every checkpoint from the stored events."""
    ledger = open_ledger(home, db)
    with _progress(None, "auditing") as bar:
        task = bar.add_task("audit", total=None)
        report = audit_ledger(
            ledger,
            known_checkpoints=_read_notes(checkpoint),
            progress=lambda n: bar.update(task, completed=n),
        )
    if as_json:
        print_json(report.to_json())
    else:
        print_report(report)
    if not report.verified:
        raise typer.Exit(EXIT_REJECTED)


@log_app.command("checkpoint")
@handles_errors
def log_checkpoint(
    home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False
) -> None:
    """Sign (or show the already signed) checkpoint of the current tree."""
    signed = checkpoint_json(open_ledger(home, db))
    if as_json:
        print_json({k: signed[k] for k in ("size", "rootHash", "note", "signedAt")})
    else:
        sys.stdout.write(signed["note"])


@log_app.command("proof")
@handles_errors
def log_proof(
    leaf: Annotated[int, typer.Argument(help="Leaf index.")],
    size: Annotated[int | None, typer.Option(help="Tree size (default: current).")] = None,
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Inclusion proof of a leaf (JSON)."""
    print_json(inclusion_json(open_ledger(home, db), leaf, size))


@log_app.command("consistency")
@handles_errors
def log_consistency(
    old: Annotated[int, typer.Argument(help="Older tree size.")],
    new: Annotated[int, typer.Argument(help="Newer tree size.")],
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Consistency proof between two tree sizes (JSON)."""
    print_json(consistency_json(open_ledger(home, db), old, new))


@log_app.command("entries")
@handles_errors
def log_entries(
    start: Annotated[int, typer.Argument(help="First leaf index.")],
    end: Annotated[int | None, typer.Argument(help="End leaf index (exclusive).")] = None,
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Log entries by leaf range: leaf index, event position, leaf hash (JSON)."""
    print_json(entries_json(open_ledger(home, db), start, end))
