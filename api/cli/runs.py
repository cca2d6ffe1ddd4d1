"""`kernelindex show` and `history`: a run's record and the events of it, verified."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from api.cli.common import (
    EXIT_REJECTED,
    DbOption,
    HomeOption,
    JsonOption,
    ServerOption,
    handles_errors,
    out,
    print_json,
    remote_server,
)
from api.cli.local import open_ledger
from api.display import format_measurement, unranked_reason
from ledger.event_verification import EventVerification
from ledger.history import DEFAULT_PAGE, MAX_PAGE, describe, history_page
from ledger.ids import run_id
from projections.references import resolve_run_in
from projections.run_record import run_record

app = typer.Typer()


@app.command()
@handles_errors
def show(
    run: Annotated[str, typer.Argument(help="Run digest or unique prefix.")],
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Summarise one run record."""
    ledger = open_ledger(home, db, read_only=True)
    summary = run_record(ledger, resolve_run_in(ledger, run))
    if as_json:
        print_json(summary)
        return
    print_summary(summary)


def print_summary(summary: dict[str, Any]) -> None:
    primary = summary["primary"]
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    rows: list[tuple[str, Any]] = [
        ("run", f"{summary['name']}  {summary['title'] or ''}"),
        ("digest", summary["digest"]),
        (
            "source",
            f"{summary['source']} #{summary['externalId']}"
            if summary["externalId"]
            else summary["source"],
        ),
        ("status", summary["status"]),
        ("primary", format_measurement(primary)),
        ("observed", summary["observedAt"]),
        ("protocol", f"{summary['protocol']['title'] or ''}  {summary['protocol']['digest']}"),
        (
            "environment",
            f"{summary['environment']['title'] or ''}  {summary['environment']['digest']}",
        ),
        ("implementation", summary["implementationDigest"]),
        ("workload", summary["workloadDigest"]),
        ("ingested", summary["ingestedAt"]),
        ("attestations", str(summary["attestationCount"])),
        (
            "lifecycle",
            "retracted"
            if summary["retracted"]
            else f"superseded by {summary['supersededBy']}"
            if summary["supersededBy"]
            else "active",
        ),
        (
            "events",
            f"{summary['events']} "
            + (
                f"(the {summary['eventsShown']} read for this record verified; all: history)"
                if summary["shownEventsVerified"]
                else "(FAILURES: see history)"
            ),
        ),
    ]
    evidence = summary.get("evidence")
    if evidence is not None:
        reasons = "; ".join(evidence["reasons"])
        rows.insert(
            4,
            ("evidence", f"{evidence['level']} — {reasons} (event {evidence['causedBy']})"),
        )
    standings = summary.get("standings") or {}
    rank_lines = [s["label"] for s in standings.values()]
    if summary.get("evidence") is not None:
        unranked = f"not ranked: {unranked_reason(summary)}"
        rows.insert(5, ("rank", "\n".join(rank_lines) if rank_lines else unranked))
    first = summary.get("compareWithFirst")
    if first is not None:
        ratio = f"{first['ratio']:.3f} × #1's latency" if first["ratio"] is not None else "—"
        rows.insert(
            6,
            (
                "compare with #1",
                f"{first['b']}: {ratio}, {len(first['differences'])} fields differ",
            ),
        )
    for label, value in rows:
        table.add_row(label, str(value) if value is not None else "—")
    out.print(table)


def print_history(entries: list[EventVerification], title: str) -> None:
    """One block per event; reads at any terminal width, unlike a seven-column table."""
    out.print(f"[bold]{escape(title)}[/]")
    for h in entries:
        verdict = (
            "[green]✓ verified[/]"
            if h.ok
            else "[bold red]✗ FAILED[/] "
            + escape("; ".join(f"{c.name}: {c.detail}" for c in h.failures))
        )
        out.print(f"\n#{h.position}  {h.received_at or '?'}  [bold]{h.event}[/]  {verdict}")
        out.print(f"    signer {h.signer or 'unknown'} ({h.role or 'no verified role'})")
        out.print(f"    {escape(describe(h))}")


@app.command()
@handles_errors
def history(
    run: Annotated[str, typer.Argument(help="Run digest or unique prefix.")],
    home: HomeOption = None,
    db: DbOption = None,
    server: ServerOption = None,
    trust_root: Annotated[
        Path | None,
        typer.Option(
            "--trust-root",
            help="With --server: the ledger's trust root, pinned (obtained out of band).",
        ),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            help="With --server: the newest checkpoint you hold. The server must prove its log "
            "extends it; it is updated after each verified answer (a split view is caught).",
        ),
    ] = None,
    unanchored: Annotated[
        bool,
        typer.Option(
            "--unsafe-trust-bundle-root",
            help="UNSAFE, with --server and no --trust-root: trust the server's own root.",
        ),
    ] = False,
    start: Annotated[
        int, typer.Option("--from", min=1, help="The event (version) to start at.")
    ] = 1,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=MAX_PAGE, help="Events to show at most.")
    ] = DEFAULT_PAGE,
    as_json: JsonOption = False,
) -> None:
    """The events of a run, a page at a time: time, type, signer and role, signature check,
    what it says.

    With --server, the run's history comes as a bundle and is verified here against the trust
    root you pin: keys chained to it, inclusion in a checkpoint its log key signed, every
    event of the run (the log's heads), and consistency with the checkpoint you hold.
    """
    remote = remote_server(server, home, db)
    if remote is not None:
        from api.cli import remote as over_http  # noqa: PLC0415 - HTTP client only with --server

        over_http.history(remote, run, trust_root, checkpoint, unanchored, start, limit, as_json)
        return
    if trust_root is not None or checkpoint is not None or unanchored:
        raise typer.BadParameter("--trust-root and --checkpoint go with --server")
    ledger = open_ledger(home, db, read_only=True)
    run_digest = resolve_run_in(ledger, run)
    page = history_page(ledger, run_id(run_digest), start, limit)
    entries = page.entries
    if as_json:
        print_json(
            {
                "run": run_digest,
                "events": [h.to_json() | {"says": describe(h)} for h in entries],
                "start": page.start,
                "next": page.next_start,
                "total": page.total,
            }
        )
    else:
        print_history(entries, f"History of {run_digest}")
        if page.next_start is not None:
            out.print(
                f"\n{page.total - page.next_start + 1} more events: "
                f"kernelindex history {run_digest[:19]} --from {page.next_start}"
            )
    if not all(h.ok for h in entries):
        raise typer.Exit(EXIT_REJECTED)
