"""`kernelindex log ...`, `export`, `verify` and `audit`: the transparency side of the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
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
    progress_bar,
)
from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.audit import audit_ledger
from ledger.errors import NotFoundError
from ledger.signing.trust import TrustRoot
from ledger.store.log_queries import (
    checkpoint_json,
    consistency_json,
    entries_json,
    held_checkpoint_size,
    inclusion_json,
)
from ledger.verification_report import Check, Report
from ledger.verify import (
    EXIT_CODES,
    Expectation,
    Outcome,
    VerificationPolicy,
    bundle_lines,
    open_bundle,
    outcome_of,
    verify_bundle_lines,
)
from projections.export import export_runs
from projections.references import resolve_run_in

log_app = typer.Typer(
    help="The transparency log: checkpoints, proofs, entries.", no_args_is_help=True
)

CheckpointOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--checkpoint", help="A signed checkpoint you hold (e.g. from a witness); repeatable."
    ),
]


_STYLE = {
    Outcome.VERIFIED: "bold green",
    Outcome.FAILED: "bold red",
    Outcome.STALE: "bold yellow",
    Outcome.UNANCHORED: "bold yellow",
}


def print_report(report: Report, outcome: Outcome | None = None) -> None:
    if outcome is None:
        outcome = Outcome.VERIFIED if report.verified else Outcome.FAILED
    verdict = f"[{_STYLE[outcome]}]{outcome}[/]"
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


def _heads_notes(path: Path) -> list[str]:
    """The heads notes of a bundle file (or the file itself, if it is a note)."""
    text = path.read_text("utf-8")
    if text.startswith("kernelindex-heads/"):
        return [text]
    found = []
    for line in text.splitlines():
        if '"type":"heads"' in line.replace(" ", ""):
            record = json.loads(line)
            if isinstance(record, dict) and isinstance(record.get("note"), str):
                found.append(record["note"])
    if not found:
        raise NotFoundError(f"{path} holds no heads (a scoped bundle does)")
    return found


def register(app: typer.Typer) -> None:
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
    checkpoint: Annotated[
        list[Path] | None,
        typer.Option(
            "--checkpoint",
            help="A signed checkpoint you hold: the bundle proves its log extends it "
            "(consistency proof). Repeatable.",
        ),
    ] = None,
    size: Annotated[
        list[int] | None,
        typer.Option("--size", min=0, help="The size of a checkpoint you hold (as --checkpoint)."),
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Write a self-contained bundle that `kernelindex verify` checks offline.

    A run's bundle holds every event of the run, every run of its comparison group and every
    key event behind their signatures, with the log's signed heads proving it is all of them.
    """
    if sum((bool(run), bool(cohort), all_events)) != 1:
        raise NotFoundError("give one of --run RUN (repeatable), --cohort KEY or --all")
    ledger = open_ledger(home, db)
    runs = [resolve_run_in(ledger, r) for r in run] if run else None
    held = [held_checkpoint_size(ledger, p.read_text("utf-8")) for p in checkpoint or []]
    held += list(size or [])
    with output.open("w", encoding="utf-8") as handle, progress_bar("exporting") as bar:
        task = bar.add_task("export", total=None)
        summary = export_runs(
            ledger,
            handle,
            runs,
            cohort=cohort,
            held=held,
            progress=lambda n: bar.update(task, completed=n),
        )
    scope = "" if summary.runs is None else f" ({summary.runs} runs, {summary.keys} keys)"
    err.print(
        f"wrote {output}: {summary.events} events{scope}, proofs against a signed checkpoint of "
        f"{summary.tree_size} leaves"
    )


_VERIFY_HELP = (
    "Verify a bundle offline (no network, no database) against the policy you state.\n\n"
    "Verdicts and exit codes: "
    + ", ".join(f"{o} {c}" for o, c in EXIT_CODES.items())
    + " (2: a usage error).\n\nChecks: "
    + ", ".join(str(c) for c in Check)
    + "."
)


@handles_errors
def verify(
    bundle: Annotated[Path, typer.Argument(help="Bundle from `kernelindex export`.")],
    trust_root: Annotated[
        Path | None,
        typer.Option("--trust-root", help="The ledger's trust root, pinned: what you trust."),
    ] = None,
    unanchored: Annotated[
        bool,
        typer.Option(
            "--unsafe-trust-bundle-root",
            help="UNSAFE: with no --trust-root, trust the root inside the bundle itself "
            "(it then proves only that it agrees with itself).",
        ),
    ] = False,
    checkpoint: CheckpointOption = None,
    run: Annotated[
        str | None,
        typer.Option("--run", help="The run the bundle must prove (digest or unique prefix)."),
    ] = None,
    min_level: Annotated[
        str | None,
        typer.Option(
            "--min-level",
            help="With --run: its evidence level must be at least this "
            "(" + ", ".join(level.label for level in EvidenceLevel) + ").",
        ),
    ] = None,
    rank: Annotated[
        int | None,
        typer.Option("--rank", min=1, help="With --run: its rank must be exactly this."),
    ] = None,
    view: Annotated[
        View, typer.Option("--view", help="The ranking view --rank is about.")
    ] = View.SOURCE_NATIVE,
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
    if (min_level is not None or rank is not None) and run is None:
        raise typer.BadParameter("--min-level and --rank are about one run: give --run too")
    expect = None
    if run is not None:
        level = EvidenceLevel.parse(min_level) if min_level is not None else None
        expect = Expectation(run, min_level=level, rank=rank, view=view)
    policy = VerificationPolicy(
        trust_root=TrustRoot.load(trust_root) if trust_root else None,
        allow_unanchored=unanchored,
        held_checkpoints=_read_notes(checkpoint),
        expect=expect,
    )
    with open_bundle(bundle) as handle, progress_bar("verifying") as bar:
        task = bar.add_task("verify", total=None)
        report = verify_bundle_lines(
            bundle_lines(handle),
            policy,
            progress=lambda n: bar.update(task, completed=n),
            workers=workers,
        )
    report.subject = str(bundle)
    outcome = outcome_of(report)
    if as_json:
        print_json(report.to_json() | {"outcome": str(outcome)})
    else:
        print_report(report, outcome)
    if outcome is not Outcome.VERIFIED:
        raise typer.Exit(EXIT_CODES[outcome])


verify.__doc__ = _VERIFY_HELP


@handles_errors
def audit(
    checkpoint: CheckpointOption = None,
    heads: Annotated[
        list[Path] | None,
        typer.Option(
            "--heads",
            help="A bundle whose signed heads must say what the log says (repeatable).",
        ),
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Recompute every leaf, the tree and every checkpoint from the stored events; and any
    bundle's signed heads given, from the log at their size."""
    ledger = open_ledger(home, db)
    notes = [note for path in heads or [] for note in _heads_notes(path)]
    with progress_bar("auditing") as bar:
        task = bar.add_task("audit", total=None)
        report = audit_ledger(
            ledger,
            known_checkpoints=_read_notes(checkpoint),
            heads=notes,
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
