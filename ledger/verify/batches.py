"""Batches of consecutive event lines, and what verifying one yields for the in-order merge.

:func:`verify_batch` is what a worker process runs; it needs nothing but the batch, which
carries a snapshot of the state its lines are checked against (:class:`EventContext`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ledger.authority import KeyLookup
from ledger.event_verification import EventVerification
from ledger.verification_report import Check, Report
from ledger.verify.events import (
    NOT_READ,
    EventContext,
    Observation,
    ParsedEvent,
    Seen,
    check_event,
    is_key_event,
    observation_of,
    parse_event,
    read_worker_event,
    seen_of,
    verified,
    with_inclusion,
)
from ledger.verify.format import UnreadableLineError, read_line
from ledger.verify.heads_map import GroupEvent, group_event_of

__all__ = ["Batch", "BatchResult", "verify_batch", "verify_into"]


class Batch(msgspec.Struct):
    """Event lines to verify together, with the state they are checked against."""

    context: EventContext
    # (line number, text) of event lines, none of them key events; verified in this process,
    # the parsed line instead of its text.
    lines: list[tuple[int, str | dict[str, Any]]]


class BatchResult(msgspec.Struct):
    """Counts and findings of a batch, and what must be applied in order when merging."""

    report: Report
    # (where, what, mark) of each readable event, in order; mark: how many findings the
    # report held once its checks were made, so the merge keeps each event's findings beside
    # its order and completeness findings (past the cap, the same ones however batched).
    seen: list[tuple[str, Seen, int]]
    # (index in ``seen``, what) of the run events the run tracker folds, in order.
    observations: list[tuple[int, Observation]] = msgspec.field(default_factory=list)
    kept: list[tuple[int, EventVerification]] = msgspec.field(default_factory=list)
    joins: list[GroupEvent] = msgspec.field(default_factory=list)  # for a whole log's heads leaves
    # Lines routed here as events that are no JSON the reader accepts: not events after all.
    unreadable: int = 0


def verify_into(
    out: BatchResult, event: ParsedEvent, context: EventContext, keys: KeyLookup
) -> tuple[EventVerification | None, bool]:
    """Verify one parsed event and add what the merge needs of it to ``out``."""
    where = event.where  # formatted once: the report and the merge both name the event
    result, included = check_event(event, context, keys, out.report, where)
    ok = verified(result)  # asked once: each ask loops over the event's checks
    out.seen.append((where, seen_of(event, result, ok), len(out.report.findings)))
    if context.observe and (observed := observation_of(result, included, ok)) is not None:
        out.observations.append((len(out.seen) - 1, observed))
    if result is not None and (joined := group_event_of(result)) is not None:
        out.joins.append(joined)
    if result is not None and event.entry.aggregate in context.keep:
        out.kept.append((event.leaf_index, with_inclusion(result, included)))
    return result, included


ROUTED_OTHERWISE = "an event line the verifying process routed as another kind of line"


def verify_batch(batch: Batch) -> BatchResult:
    """Verify a batch (in a worker process, or here). Never raises for bad data."""
    out = BatchResult(Report(subject="batch"), [])
    lookup = batch.context.keys.get
    for number, line in batch.lines:
        if isinstance(line, str):
            event = read_worker_event(f"line {number}", line, out.report)
            if event is not NOT_READ:
                if event is not None:
                    verify_into(out, event, batch.context, lookup)
                continue
            try:
                record = read_line(line)
            except UnreadableLineError:
                # Routed by its type alone (``route_line``): refused as the verifying
                # process refuses a line it cannot read, and counted as no event.
                out.report.fail(Check.FORMAT, f"line {number}", UnreadableLineError.finding)
                out.unreadable += 1
                continue
            if not (
                isinstance(record, dict)
                and record.get("type") == "event"
                and not is_key_event(record)
            ):
                # The two reads are held to agree by property tests; were they ever not to,
                # the line is refused here, never verified as what it is not.
                out.report.fail(Check.FORMAT, f"line {number}", ROUTED_OTHERWISE)
                out.unreadable += 1
                continue
        else:
            record = line
        event = parse_event(f"line {number}", record, out.report)
        if event is not None:
            # Only key events teach keys, and they never come here: a non-Principal event
            # that carries a key statement fails its event-type check, teaching nothing.
            verify_into(out, event, batch.context, lookup)
    return out
