"""`kernelindex show` and `history`: a run's record and the events of it, verified.

Both ask the service (``api.service``): ``--json`` prints its reply as ``GET /v1/runs/{run}``
and ``GET /v1/runs/{run}/history`` send it; the tables are drawn from the same reply.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
    print_reply,
    remote_server,
)
from api.display import format_measurement, unranked_reason
from ledger.history_reads import DEFAULT_PAGE, MAX_PAGE

if TYPE_CHECKING:
    from collections.abc import Sequence

    from api.service.models.history import HistoryEvent
    from api.service.models.runs import RunRecord

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
    from api.cli.driver import quick_reads  # noqa: PLC0415 - only this command's door

    # Through the driver where the views are fresh (issue 33), else through the full
    # service, which folds first: the same reads either way (api/service/run_reads.py).
    with quick_reads(home, db, views=True) as reads:
        record = reads.runs.record(run) if reads is not None else None
    if record is None:
        from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

        with local_service(home, db) as service:
            record = service.runs.record(run)
    if as_json:
        print_reply(record)
        return
    print_summary(record)


def print_summary(record: RunRecord) -> None:
    # Imported here: the record's document is what api.display reads (as the pages do).
    from api.service.models import to_builtins  # noqa: PLC0415

    document: dict[str, Any] = to_builtins(record)
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    rows: list[tuple[str, Any]] = [
        ("run", f"{record.name}  {record.title or ''}"),
        ("digest", record.digest),
        ("source", source_line(record)),
        ("status", record.status),
        ("primary", format_measurement(document["primary"])),
        ("published", published_line(record)),
        ("admitted", f"{record.provenance.admitted_at} (by this ledger)"),
        ("observed", record.provenance.observed_at),
        ("protocol", f"{record.protocol.title or ''}  {record.protocol.digest}"),
        ("environment", f"{record.environment.title or ''}  {record.environment.digest}"),
        *identity_rows(record),
        ("workload", record.workload_digest),
        ("attestations", str(record.attestation_count)),
        (
            "lifecycle",
            "retracted"
            if record.retracted
            else f"superseded by {record.superseded_by}"
            if record.superseded_by
            else "active",
        ),
        (
            "events",
            f"{record.events} "
            + (
                f"(the {record.events_shown} read for this record verified; all: history)"
                if record.shown_events_verified
                else "(FAILURES: see history)"
            ),
        ),
    ]
    evidence = document.get("evidence")
    if evidence is not None:
        reasons = "; ".join(evidence["reasons"])
        rows.insert(
            4,
            ("evidence", f"{evidence['level']} — {reasons} (event {evidence['causedBy']})"),
        )
        standings = document.get("standings") or {}
        rank_lines = [s["label"] for s in standings.values()]
        unranked = f"not ranked: {unranked_reason(document)}"
        rows.insert(5, ("rank", "\n".join(rank_lines) if rank_lines else unranked))
    first = document.get("compareWithFirst")
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


def source_line(record: RunRecord) -> str | None:
    """``NVIDIA SOL-ExecBench (sol-execbench) #38823``: the source's own name, its slug, its id."""
    facts = record.provenance
    named = f"{facts.source_name} ({facts.source})" if facts.source_name else facts.source
    return f"{named} #{record.external_id}" if record.external_id else named


def published_line(record: RunRecord) -> str:
    facts = record.provenance
    if facts.published_at is None:
        return f"not stated by {facts.source_name or facts.source or 'the source'}"
    where = (
        ""
        if facts.published_stated_by in (None, "the signed ingestion")
        else (f"; from {facts.published_stated_by}")
    )
    return f"{facts.published_at} (by {facts.source_name or facts.source}{where})"


def identity_rows(record: RunRecord) -> list[tuple[str, str | None]]:
    """Implementation (who, where that is read from, its digest, as the protocol and
    environment rows show theirs), project and revision."""
    identity = record.identity
    digest = record.implementation_digest or ""
    if identity.stated_by is None:
        return [("implementation", digest)]
    said = f"  (from {identity.stated_by})"
    return [
        ("implementation", f"{identity.implementation or '—'}{said}  {digest}".rstrip()),
        ("project", identity.project),
        ("revision", identity.revision),
    ]


def print_history(events: Sequence[HistoryEvent], title: str) -> None:
    """One block per event; reads at any terminal width, unlike a seven-column table."""
    out.print(f"[bold]{escape(title)}[/]")
    for h in events:
        failures = [c for c in h.checks if not c.ok]
        verdict = (
            "[green]✓ verified[/]"
            if h.verified
            else "[bold red]✗ FAILED[/] "
            + escape("; ".join(f"{c.name}: {c.detail}" for c in failures))
        )
        out.print(f"\n#{h.position}  {h.received_at or '?'}  [bold]{h.event}[/]  {verdict}")
        out.print(f"    signer {h.signer or 'unknown'} ({h.role or 'no verified role'})")
        out.print(f"    {escape(h.says)}")


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
    from api.cli.driver import quick_reads  # noqa: PLC0415 - only this command's door

    # Through the driver where the views are fresh (issue 33), else through the full
    # service, which folds first: the same reads either way (api/service/run_history.py).
    with quick_reads(home, db, views=True) as reads:
        page = reads.runs.history(run, start, limit) if reads is not None else None
    if page is None:
        from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

        with local_service(home, db) as service:
            page = service.history.run(run, start, limit)
    if as_json:
        print_reply(page)
    else:
        print_history(page.events, f"History of {page.run}")
        if page.next is not None:
            out.print(
                f"\n{page.total - page.next + 1} more events: "
                f"kernelindex history {page.run[:19]} --from {page.next}"
            )
    if not page.all_verified:
        raise typer.Exit(EXIT_REJECTED)
