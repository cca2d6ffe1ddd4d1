"""The ``--server`` halves of ``kernelindex attest`` and ``history``: signed here, sent to a
ledger over HTTP, and for history verified here against the trust root the user pins. Apart
from ``api.cli.runs`` and ``api.cli.statements`` so that a local command never loads the
HTTP client."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from api.cli.common import EXIT_REJECTED, out, print_json, print_remote_receipt
from api.cli.files import written_whole
from api.cli.report import print_report
from api.cli.runs import print_history
from api.client import LedgerClient, RemoteEvent, RemoteHistory, remote_history, remote_run
from api.service.models.history import CheckResult, HistoryEvent
from ledger.history import describe
from ledger.signing.trust import TrustRoot
from ledger.verify import EXIT_CODES, Outcome, VerificationPolicy


def attest(
    server: str, run: str, signed: Callable[[str, str], dict[str, Any]], as_json: bool
) -> None:
    # Signed here: the key never leaves this machine, the server only sees the envelope.
    with LedgerClient(server) as client:
        run_digest, run_name = remote_run(client, run)
        reply = client.post_attestation(run_digest, signed(run_digest, run_name))
    print_remote_receipt(reply, as_json, "attestation")


def history(
    server: str,
    run: str,
    trust_root: Path | None,
    checkpoint: Path | None,
    unanchored: bool,
    start: int,
    limit: int,
    as_json: bool,
) -> None:
    held = checkpoint.read_text("utf-8") if checkpoint and checkpoint.exists() else None
    policy = VerificationPolicy(
        trust_root=TrustRoot.load(trust_root) if trust_root else None,
        allow_unanchored=unanchored,
        held_checkpoints=[held] if held else [],
    )
    with LedgerClient(server) as client:
        found = remote_history(client, run, policy)
    if checkpoint is not None and found.ok and found.checkpoint is not None:
        with written_whole(checkpoint) as partial:  # the one you held, or the new one whole
            partial.write_text(found.checkpoint, "utf-8")
    _show_remote_history(found, as_json, start, limit)


def _show_remote_history(found: RemoteHistory, as_json: bool, start: int, limit: int) -> None:
    """The page asked for; the verification (and its verdict) covered the whole run."""
    shown = [e for e in found.events if start <= e.entry.version < start + limit]
    outcome = found.outcome
    if as_json:
        print_json(
            {
                "run": found.run,
                "outcome": str(outcome),
                "verification": found.report.to_json(),
                "events": [
                    e.entry.to_json()
                    | {
                        "says": describe(e.entry),
                        "leafIndex": e.leaf_index,
                        "envelopeDigest": e.envelope_digest,
                    }
                    for e in shown
                ],
                "total": len(found.events),
            }
        )
    else:
        print_history([_as_shown(e) for e in shown], f"History of {found.run}")
        out.print()
        print_report(found.report, outcome)
    if outcome is not Outcome.VERIFIED:
        raise typer.Exit(EXIT_CODES[outcome])
    if not found.ok:
        raise typer.Exit(EXIT_REJECTED)


def _as_shown(found: RemoteEvent) -> HistoryEvent:
    """An event verified here, as the local history shows one (the service's event model)."""
    e = found.entry
    return HistoryEvent(
        position=e.position,
        version=e.version,
        event=e.event,
        received_at=e.received_at,
        signer=e.signer,
        role=e.role,
        predicate_type=e.predicate_type,
        predicate=e.predicate,
        envelope=e.envelope,
        verified=e.ok,
        checks=[CheckResult(name=c.name, ok=c.ok, detail=c.detail) for c in e.checks],
        says=describe(e),
        leaf_index=found.leaf_index,
        changed=None,
    )
