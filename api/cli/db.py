"""`kernelindex db`: the database schema, created and upgraded only when the operator says so."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from api.cli.common import DbOption, HomeOption, JsonOption, fail, handles_errors, out, print_json
from ledger.home import LedgerHome

if TYPE_CHECKING:
    from api.service.models.admin import SchemaReport

db_app = typer.Typer(help="Database schema: status and explicit upgrades.", no_args_is_help=True)


def _print_json(report: SchemaReport) -> None:
    from api.service.models import to_builtins  # noqa: PLC0415

    print_json(to_builtins(report))


@db_app.command("upgrade")
@handles_errors
def db_upgrade(home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Create the schema, or bring it to this build's version (idempotent; safe to rerun)."""
    # Imported here: the schema's code loads the database stack, which --help never needs.
    from api.service.admin import upgrade_schema  # noqa: PLC0415

    report = upgrade_schema(LedgerHome.at(home, db).db_url)
    if as_json:
        _print_json(report)
        return
    applied = report.applied or []
    if applied:
        steps = ", ".join(str(v) for v in applied)
        out.print(
            f"{report.database}: schema upgraded to version {report.version} (applied {steps})"
        )
        if 2 in applied and applied[0] > 1:
            # Version 2 came with stricter admission rules (one signature per envelope,
            # canonical roles, no hidden characters...), which every re-verification applies.
            out.print(
                "note: events admitted by an earlier release are now judged by the stricter "
                "rules of this one; run 'kernelindex audit' to see any that no longer verify"
            )
    else:
        out.print(f"{report.database}: schema already at version {report.version}; nothing to do")


@db_app.command("status")
@handles_errors
def db_status(home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Show the schema version of the database and whether this build can use it (exit 1 if not)."""
    from api.service.admin import schema_status  # noqa: PLC0415

    report = schema_status(LedgerHome.at(home, db).db_url)
    if as_json:
        _print_json(report)
    elif report.version is None:
        out.print(f"{report.database}: no KernelIndex schema (this build needs {report.required})")
    else:
        out.print(
            f"{report.database}: schema version {report.version} (this build needs "
            f"{report.required}), upgraded {report.upgraded_at} by {report.software}"
        )
    if not report.current:
        raise fail(
            "schema-not-current",
            "run 'kernelindex db upgrade'"
            if (report.version or 0) < report.required
            else "the database is newer than this build: upgrade the software",
        )


# What this module adds to `kernelindex` (api/cli/main.py lists it).
app = typer.Typer()
app.add_typer(db_app, name="db")
