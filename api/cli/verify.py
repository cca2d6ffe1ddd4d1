"""`kernelindex verify`: a bundle checked offline, against the policy the user states.

It needs no database: this module and what it imports load none of the database stack
(SQLAlchemy, eventsourcing, the store, the read models), which tests/cli/test_cli_start.py
holds on the running command.

No ``from __future__ import annotations`` here: Typer reads the command's parameters from
its annotations, and strings it would compile and evaluate again as each run starts.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from api.cli.common import (
    CheckpointOption,
    JsonOption,
    handles_errors,
    print_json,
    progress_bar,
    read_notes,
)
from api.cli.report import print_report
from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.signing.trust import TrustRoot
from ledger.verification_report import Check
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

if TYPE_CHECKING:
    from ledger.witness.policy import Policy

app = typer.Typer()

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
    policy_file: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="A C2SP tlog-policy file: the witnesses whose quorum must have cosigned the "
            "bundle's checkpoint (default: the pinned trust root's; with none the bundle is "
            "reported unwitnessed).",
        ),
    ] = None,
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
    if outcome is not Outcome.VERIFIED:
        raise typer.Exit(EXIT_CODES[outcome])


def _policy(path: Path | None) -> "Policy | None":
    """The witness policy in ``--policy FILE``; its parser is imported only for one."""
    if path is None:
        return None
    from ledger.witness.policy import read_policy_file  # noqa: PLC0415

    return read_policy_file(path)


verify.__doc__ = _VERIFY_HELP
app.command("verify")(verify)
