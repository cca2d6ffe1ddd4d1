"""`kernelindex projections ...`: rebuild the read models from the log, and show how far they
have folded it (``LedgerService.admin``)."""

from __future__ import annotations

import typer

from api.cli.common import (
    DbOption,
    HomeOption,
    JsonOption,
    handles_errors,
    out,
    print_json,
    progress_bar,
)

projections_app = typer.Typer(help="Rebuild and inspect the read models.", no_args_is_help=True)
app = typer.Typer()
app.add_typer(projections_app, name="projections")


@projections_app.command("rebuild")
@handles_errors
def projections_rebuild(
    home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False
) -> None:
    """Drop every read model and rebuild it from the events; print each table's digest."""
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs
    from api.service.models import to_builtins  # noqa: PLC0415

    with local_service(home, db, read_only=False) as service, progress_bar("refolding") as bar:
        task = bar.add_task("", total=service.admin.log_position())
        done = service.admin.rebuild(progress=lambda position: bar.update(task, completed=position))
    report = done.report
    if as_json:
        print_json(to_builtins(report))
        return
    out.print(f"rebuilt from {report.events} events in {report.seconds:.2f} s")
    for name, digest in report.tables.items():
        same = "same as before" if done.before.get(name) == digest else "[yellow]CHANGED[/]"
        out.print(f"  {name:<28} {digest}  {same}")


@projections_app.command("status")
@handles_errors
def projections_status(
    home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False
) -> None:
    """Catch up, then show how far the views have folded the log and their digests."""
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs
    from api.service.models import to_builtins  # noqa: PLC0415

    with local_service(home, db) as service:
        status = service.admin.views_status()
    if as_json:
        print_json(to_builtins(status))
    else:
        out.print(f"views at position {status.position} ({status.folded} new events folded)")
        for name, digest in status.tables.items():
            out.print(f"  {name:<28} {digest}")
