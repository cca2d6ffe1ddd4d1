"""`kernelindex verify`: a bundle checked offline, against the policy the user states.

It needs no database: this module and what it imports load none of the database stack
(SQLAlchemy, eventsourcing, the store, the read models), which tests/cli/test_cli_start.py
holds on the running command.

Nor, for a plain command line, Typer (issue 33: start within 5x ``python -c pass``): the
parameters are one table (``PARAMETERS``, api/cli/options.py) from which Typer's command is
built when Typer runs (``app``, made on first use), and from which :func:`fast_main` reads a
well-formed argument vector itself; both call :func:`verified`. Anything :func:`fast_main` does
not fully understand (``--help``, a bad or unknown option, arguments that do not go
together) it leaves to Typer, which words it as it always has.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from api.cli.console import (
    Refused,
    UsageProblem,
    print_json,
    progress_bar,
    read_notes,
    refuses,
)
from api.cli.options import CHECKPOINT, JSON, Param, parse, signature
from api.cli.report import print_report
from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.signing.trust import TrustRoot
from ledger.verification_report import Check
from ledger.verify import (
    EXIT_CODES,
    Expectation,
    VerificationPolicy,
    bundle_lines,
    open_bundle,
    outcome_of,
    verify_bundle_lines,
)

if TYPE_CHECKING:
    import typer

    from ledger.witness.policy import Policy

_VERIFY_HELP = (
    "Verify a bundle offline (no network, no database) against the policy you state.\n\n"
    "Verdicts and exit codes: "
    + ", ".join(f"{o} {c}" for o, c in EXIT_CODES.items())
    + " (2: a usage error).\n\nChecks: "
    + ", ".join(str(c) for c in Check)
    + "."
)

# The command's parameters, in the order its help lists them.
PARAMETERS: Final = (
    Param("bundle", Path, help="Bundle from `kernelindex export`."),
    Param(
        "trust_root",
        Path | None,
        "--trust-root",
        help="The ledger's trust root, pinned: what you trust.",
    ),
    Param(
        "unanchored",
        bool,
        "--unsafe-trust-bundle-root",
        default=False,
        help="UNSAFE: with no --trust-root, trust the root inside the bundle itself "
        "(it then proves only that it agrees with itself).",
    ),
    CHECKPOINT,
    Param(
        "run", str | None, "--run", help="The run the bundle must prove (digest or unique prefix)."
    ),
    Param(
        "min_level",
        str | None,
        "--min-level",
        help="With --run: its evidence level must be at least this "
        "(" + ", ".join(level.label for level in EvidenceLevel) + ").",
    ),
    Param("rank", int | None, "--rank", min=1, help="With --run: its rank must be exactly this."),
    Param(
        "view",
        View,
        "--view",
        default=View.SOURCE_NATIVE,
        help="The ranking view --rank is about.",
    ),
    Param(
        "policy_file",
        Path | None,
        "--policy",
        help="A C2SP tlog-policy file: the witnesses whose quorum must have cosigned the "
        "bundle's checkpoint (default: the pinned trust root's; with none the bundle is "
        "reported unwitnessed).",
    ),
    JSON,
    Param(
        "workers",
        int | None,
        "--workers",
        min=1,
        help="Processes that verify events (default: one per CPU core; 1: this one only).",
    ),
)


def verified(
    bundle: Path,
    trust_root: Path | None,
    unanchored: bool,
    checkpoint: list[Path] | None,
    run: str | None,
    min_level: str | None,
    rank: int | None,
    view: View,
    policy_file: Path | None,
    as_json: bool,
    workers: int | None,
) -> int:
    """Verify ``bundle``, print the report, and give the verdict's exit code."""
    if (min_level is not None or rank is not None) and run is None:
        raise UsageProblem("--min-level and --rank are about one run: give --run too")
    expect = None
    if run is not None:
        level = EvidenceLevel.parse(min_level) if min_level is not None else None
        expect = Expectation(run, min_level=level, rank=rank, view=view)
    policy = VerificationPolicy(
        trust_root=TrustRoot.load(trust_root) if trust_root else None,
        allow_unanchored=unanchored,
        held_checkpoints=read_notes(checkpoint),
        expect=expect,
        witness_policy=_policy(policy_file),
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
    return EXIT_CODES[outcome]


def _policy(path: Path | None) -> Policy | None:
    """The witness policy in ``--policy FILE``; its parser is imported only for one."""
    if path is None:
        return None
    from ledger.witness.policy import read_policy_file  # noqa: PLC0415

    return read_policy_file(path)


def fast_main(args: list[str]) -> int | None:
    """Run ``kernelindex verify ARGS`` without Typer and give its exit code; None (nothing
    done, nothing printed) where Typer must parse ``args`` or word a usage error."""
    values = parse(PARAMETERS, args)
    if values is None:
        return None
    try:
        return refuses(verified)(**values)
    except UsageProblem:
        return None  # checked before anything is read or printed: Typer says it
    except Refused as exc:
        return exc.code


def _typer_app() -> typer.Typer:
    """The Typer command, from the same table and the same function."""
    import typer  # noqa: PLC0415 - Typer runs the command: it is loaded already

    from api.cli.common import handles_errors  # noqa: PLC0415

    def verify(**values: Any) -> None:
        try:
            code = verified(**values)
        except UsageProblem as exc:
            raise typer.BadParameter(str(exc)) from None
        if code:
            raise typer.Exit(code)

    # What Typer reads the command's parameters from (a function's __dict__ holds it).
    vars(verify)["__signature__"], verify.__annotations__ = signature(PARAMETERS)
    verify.__doc__ = _VERIFY_HELP
    made = typer.Typer()
    made.command("verify")(handles_errors(verify))
    return made


def __getattr__(name: str) -> typer.Typer:
    # ``app``, as every command module holds one: made when Typer asks for it.
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    made = globals()["app"] = _typer_app()
    return made
