"""The history of #1 records: every time a run took first place in its comparison group.

A pure walk (:func:`record_history`) over one group's runs in log order, which the fold
runs whenever it re-ranks a group and keeps in the records view, and the read
(:func:`record_entries`) of a page of that view. Both are functions of the views alone, so
the history is rebuilt identically from the same events every time.

What "took first place" means is the ranking's own decision (``domain.ranking``,
source-native view): a run sets a record when, ranked against the standing #1 alone, it
gets the better rank. Equal values share a rank, so matching the record is not beating it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import select, tuple_

from domain.ranking import RankEntry, RankingError, View, rank_group
from ledger.store.event_store import StoreSession
from projections.group_labels import GroupLabel, group_labels
from projections.tables import records, runs

# Records are those of the board a group's #1 is read from (``queries.leaders``).
VIEW = View.SOURCE_NATIVE
FEED_MAX = 100


@dataclass(frozen=True)
class Arrival:
    """One run of a comparison group as the views hold it now, and where the log put it."""

    position: int  # ingested_position: the run's place in the log
    entry: RankEntry


@dataclass(frozen=True)
class Record:
    """A run that took #1 on arrival; ``previous`` is the #1 it displaced (None: the
    group's first ranked run). ``withdrawn`` says "retracted" or "superseded" when that
    happened to the run since: it stays in the history, marked."""

    position: int
    run: str
    value: float
    previous: str | None = None
    previous_value: float | None = None
    withdrawn: str | None = None

    @property
    def factor(self) -> float | None:
        """How many times better than the displaced #1: its value ÷ this one's, the
        convention of "compare with #1" (``domain.ranking.compare``: ≥ 1 when the other is
        slower). None for a first record or a zero value."""
        if self.previous_value is None or self.value == 0:
            return None
        return self.previous_value / self.value


def record_history(arrivals: Iterable[Arrival]) -> list[Record]:
    """The record-setting sequence of one comparison group, in log order.

    Walks the runs in arrival order (``position``), keeping the standing #1: a run that the
    ranking puts strictly ahead of it is a record and becomes the standing #1; the first
    ranked run is the group's first record. A run counts when the ranking would have ranked
    it on arrival (``RankEntry.ranked_in``: passed, with a primary value).

    What it ignores, because the views do not say *when* it happened:

    * a retraction or supersession: the run is judged as it arrived (active), so a record
      later retracted stays in the history, marked ``withdrawn``, and later runs still had
      to beat it. The run that inherits #1 when a record is withdrawn is therefore not a
      record of its own; with nothing withdrawn, the last record is the group's current #1
      (among runs tied at #1, the earliest to arrive);
    * a run attached to its group later (``Run.ManifestsAttached``): it arrives at its
      ingestion, not at its attachment;
    * the verified view, whose values come with reruns long after a run arrives.
    """
    ordered = sorted(arrivals, key=lambda a: a.position)
    _check(ordered)
    records: list[Record] = []
    best: Record | None = None
    holder: RankEntry | None = None
    for arrival in ordered:
        # As it arrived: a retraction or supersession came later, if at all.
        then = replace(arrival.entry, retracted=False, superseded=False)
        if not then.ranked_in(VIEW):
            continue
        board = {r.run: r for r in rank_group([then] if holder is None else [holder, then], VIEW)}
        mine = board[then.run]
        if holder is not None and mine.rank >= board[holder.run].rank:
            continue  # slower, or tied: #1 stays where it was
        best = Record(
            position=arrival.position,
            run=then.run,
            value=mine.value,
            previous=None if best is None else best.run,
            previous_value=None if best is None else best.value,
            withdrawn=_withdrawn(arrival.entry),
        )
        records.append(best)
        holder = then
    return records


def _check(arrivals: list[Arrival]) -> None:
    keys = {a.entry.comparison_key for a in arrivals}
    if len(keys) > 1:
        raise RankingError(f"a record history is of one comparison group, not {len(keys)}")
    if len({a.entry.run for a in arrivals}) != len(arrivals):
        raise RankingError("a run appears twice in the group")
    if len({a.position for a in arrivals}) != len(arrivals):
        raise RankingError("two runs share a log position")


def _withdrawn(entry: RankEntry) -> str | None:
    if entry.retracted:
        return "retracted"
    return "superseded" if entry.superseded else None


# --- the read ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordEntry:
    """A record with the runs-view rows of its run and of the #1 it displaced."""

    record: Record
    run: dict[str, Any]
    previous: dict[str, Any] | None


@dataclass(frozen=True)
class RecordPage:
    entries: list[RecordEntry]  # newest first
    newest: str | None  # ingested_at of the newest record of the whole history
    more: bool  # older records follow the page


def record_row(key: str, record: Record) -> dict[str, Any]:
    """A record as the records view holds it (the fold writes these with the group's ranks)."""
    return {
        "comparison_key": key,
        "position": record.position,
        "run_digest": record.run,
        "value": record.value,
        "previous_run": record.previous,
        "previous_value": record.previous_value,
        "withdrawn": record.withdrawn,
    }


def _record(row: Any) -> Record:
    return Record(
        position=int(row["position"]),
        run=str(row["run_digest"]),
        value=float(row["value"]),
        previous=row["previous_run"],
        previous_value=row["previous_value"],
        withdrawn=row["withdrawn"],
    )


def record_entries(
    session: StoreSession, key: str | None = None, before: int | None = None, limit: int = FEED_MAX
) -> RecordPage:
    """Records of every group (or of group ``key``), newest first: those set before log
    position ``before`` when given, ``limit`` at most.

    Read from the records view, which the fold keeps with each group's ranks: a page costs
    its own rows and their runs, whatever the size of the ledger."""
    scope = select(records)
    if key is not None:
        scope = scope.where(records.c.comparison_key == key)
    newest_first = records.c.position.desc()
    top = session.execute(scope.order_by(newest_first).limit(1)).mappings().first()
    page = scope if before is None else scope.where(records.c.position < before)
    shown = [
        _record(row)
        for row in session.execute(page.order_by(newest_first).limit(limit + 1)).mappings()
    ]
    wanted = {r.run for r in shown[:limit]} | {r.previous for r in shown[:limit] if r.previous}
    if top is not None:
        wanted.add(str(top["run_digest"]))
    rows = {
        str(row["run_digest"]): dict(row)
        for row in session.execute(select(runs).where(runs.c.run_digest.in_(sorted(wanted))))
        .mappings()
        .all()
    }
    return RecordPage(
        entries=[
            RecordEntry(r, rows[r.run], None if r.previous is None else rows[r.previous])
            for r in shown[:limit]
        ],
        newest=None if top is None else str(rows[str(top["run_digest"])]["ingested_at"]),
        more=len(shown) > limit,
    )


@dataclass(frozen=True)
class GroupName:
    """How a feed names a group: ``short`` for a title ("… on NVIDIA B200 · v1.1", the
    words that tell it from the groups of the same operation and GPU), ``parts`` for the
    rest (what its key is made of)."""

    short: str
    parts: str


def group_names(session: StoreSession, keys: Iterable[str]) -> dict[str, GroupName]:
    """Names of the groups ``keys``, each told apart from every group of its operation and
    GPU in the views (not only from those shown with it)."""
    shown = {label.key: label for label in group_labels(session, sorted(set(keys)))}
    pairs = sorted({(lb.benchmark, lb.product) for lb in shown.values()}, key=str)
    alike: set[str] = set(shown)
    if pairs:
        query = select(runs.c.comparison_key).where(
            runs.c.comparison_key.is_not(None),
            tuple_(runs.c.benchmark, runs.c.product).in_(pairs),
        )
        alike |= {str(k) for k in session.execute(query.distinct()).scalars()}
    everyone = group_labels(session, sorted(alike))
    return {key: _name(label, label.lookalikes(everyone)) for key, label in shown.items()}


def _name(label: GroupLabel, alike: list[GroupLabel]) -> GroupName:
    short = f"{label.benchmark or 'unknown operation'} on {label.product or 'unknown GPU'}"
    apart = label.short_apart(alike) if alike else ""
    return GroupName(short + (f" · {apart}" if apart else ""), label.separated_by([]))
