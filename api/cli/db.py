"""`kernelindex db`: the database schema, created and upgraded only when the operator says so."""

from __future__ import annotations

from typing import Any

import typer
from sqlalchemy.engine import make_url

from api.cli.common import DbOption, HomeOption, JsonOption, fail, handles_errors, out, print_json
from ledger.home import LedgerHome
from ledger.store.schema import SCHEMA_VERSION, SchemaStatus, read_status, upgrade
from projections.runner import prepare_views

db_app = typer.Typer(help="Database schema: status and explicit upgrades.", no_args_is_help=True)


def _shown(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def _json(url: str, status: SchemaStatus, applied: list[int] | None = None) -> dict[str, Any]:
    value: dict[str, Any] = {
        "database": _shown(url),
        "version": status.version,
        "required": status.required,
        "current": status.current,
        "upgradedAt": status.upgraded_at,
        "software": status.software,
    }
    if applied is not None:
        value["applied"] = applied
    return value


@db_app.command("upgrade")
@handles_errors
def db_upgrade(home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Create the schema, or bring it to this build's version (idempotent; safe to rerun)."""
    url = LedgerHome.at(home, db).db_url
    status, applied = upgrade(url)
    prepare_views(url)  # the read models' own tables (projections.tables.VIEWS_VERSION)
    if as_json:
        print_json(_json(url, status, applied))
        return
    if applied:
        steps = ", ".join(str(v) for v in applied)
        out.print(f"{_shown(url)}: schema upgraded to version {status.version} (applied {steps})")
        if 2 in applied and applied[0] > 1:
            # Version 2 came with stricter admission rules (one signature per envelope,
            # canonical roles, no hidden characters...), which every re-verification applies.
            out.print(
                "note: events admitted by an earlier release are now judged by the stricter "
                "rules of this one; run 'kernelindex audit' to see any that no longer verify"
            )
    else:
        out.print(f"{_shown(url)}: schema already at version {status.version}; nothing to do")


@db_app.command("status")
@handles_errors
def db_status(home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Show the schema version of the database and whether this build can use it (exit 1 if not)."""
    url = LedgerHome.at(home, db).db_url
    status = read_status(url)
    if as_json:
        print_json(_json(url, status))
    elif status.version is None:
        out.print(f"{_shown(url)}: no KernelIndex schema (this build needs {SCHEMA_VERSION})")
    else:
        out.print(
            f"{_shown(url)}: schema version {status.version} (this build needs "
            f"{SCHEMA_VERSION}), upgraded {status.upgraded_at} by {status.software}"
        )
    if not status.current:
        raise fail(
            "schema-not-current",
            "run 'kernelindex db upgrade'"
            if (status.version or 0) < SCHEMA_VERSION
            else "the database is newer than this build: upgrade the software",
        )


# What this module adds to `kernelindex` (api/cli/main.py lists it).
app = typer.Typer()
app.add_typer(db_app, name="db")
