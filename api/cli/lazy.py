"""A command group that imports a command's module only when that command runs.

Click's lazily loaded subcommands (its docs, "Complex Applications"): a group subclass whose
``list_commands`` names every command and whose ``get_command`` imports the one asked for;
Typer takes the class as ``typer.Typer(cls=...)``. Start-up is most of a short command's
time, and the modules behind the commands (the database stack, the importers, the server)
are most of the start-up, so ``kernelindex show`` loads the run commands only and
``kernelindex verify`` the offline verifier only.

The group's own help lists every command by the one line the table gives it, so ``--help``
imports no command module (tests/cli/test_cli_start.py holds each line to what the command
itself says).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import typer.main
from typer.core import TyperCommand, TyperGroup

from api.cli.parameters import fast_parameters

if TYPE_CHECKING:
    # The Click that Typer runs on (Typer ≥ 0.2x carries its own copy): the types the
    # methods overridden here are declared with.
    from typer import _click as click

    from api.cli.main import Lazy


class LazyGroup(TyperGroup):
    """A Typer group whose commands are the ``table``'s, each loaded on first use."""

    table: ClassVar[Mapping[str, Lazy]] = {}

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._listing = False  # while this group's help is drawn: a name and a line each
        self._built: dict[str, TyperGroup] = {}  # module → its commands, built once

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(dict.fromkeys([*self.table, *super().list_commands(ctx)]))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        loaded = super().get_command(ctx, cmd_name)
        entry = self.table.get(cmd_name)
        if loaded is not None or entry is None:
            return loaded
        if self._listing:
            return TyperCommand(cmd_name, help=entry.help)
        group = self._built.get(entry.module)
        if group is None:
            group = self._built[entry.module] = typer.main.get_group(_typer_app(entry))
            fast_parameters(group, ctx)
        command = group.commands[cmd_name]
        self.add_command(command, cmd_name)
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # The group's own options too: Typer adds its completion options after making it.
        fast_parameters(self, ctx)
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.table and not ctx.resilient_parsing:
            # Not a command: Typer's "Did you mean ..." looks among the commands loaded, and
            # none is; it sees each by its listing line (the run ends in the usage error).
            self._listing = True
            try:
                for name in self.table:
                    loaded = self.get_command(ctx, name)
                    if loaded is not None:
                        self.commands.setdefault(name, loaded)
            finally:
                self._listing = False
        return super().resolve_command(ctx, args)


def _typer_app(entry: Lazy) -> typer.Typer:
    """The ``typer.Typer`` that ``entry``'s module holds as ``app``."""
    app = importlib.import_module(entry.module).app
    if not isinstance(app, typer.Typer):
        raise TypeError(f"{entry.module}.app is not a typer.Typer")
    return app


def root_app(table: Mapping[str, Lazy], help: str) -> typer.Typer:
    """The ``kernelindex`` Typer app: a group of ``table``'s commands, each loaded on use."""

    class Group(LazyGroup):
        pass

    Group.table = table
    app = typer.Typer(
        name="kernelindex",
        cls=Group,
        help=help,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def _root() -> None:
        """KernelIndex Ledger: signed, append-only, offline-verifiable GPU-kernel benchmarks."""

    return app
