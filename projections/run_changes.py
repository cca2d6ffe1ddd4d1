"""What each event of a run changed: its evidence level, its standing in rankings.

Refolds the run's verified events in order with the same domain fold the projections use,
so a history shows exactly which event moved the level (and that attestations never do).
"""

from __future__ import annotations

from typing import Any

from domain.event_names import EventName
from domain.run_facts import RunFold
from ledger.event_verification import EventVerification


def level_name(fold: RunFold) -> str:
    return fold.evidence.level.name.lower()


def changes_by_event(
    run_digest: str, entries: list[EventVerification]
) -> dict[int, dict[str, Any]]:
    """Position → {"evidence": {"from", "to", "reasons"}, "ranking": ...} for each event that
    changed something; events that failed verification change nothing and say so."""
    changes: dict[int, dict[str, Any]] = {}
    fold: RunFold | None = None
    for entry in entries:
        if not entry.ok or entry.predicate is None:
            changes[entry.position] = {"ignored": "failed verification: changes nothing"}
            continue
        before = None if fold is None else level_name(fold)
        was_ranked = fold is not None and not (fold.retracted or fold.superseded_by)
        if entry.event == EventName.RUN_INGESTED:
            fold = RunFold.ingested(entry.position, run_digest, entry.predicate)
        elif fold is not None:
            fold.apply(entry.event, entry.position, entry.signer or "", entry.predicate)
        if fold is None:
            continue
        change: dict[str, Any] = {}
        after = level_name(fold)
        if after != before:
            change["evidence"] = {
                "from": before,
                "to": after,
                "reasons": list(fold.evidence.reasons),
            }
        ranked = not (fold.retracted or fold.superseded_by)
        if was_ranked and not ranked:
            change["ranking"] = "left the rankings"
        changes[entry.position] = change
    return changes
