"""The history of #1 records: every time a run took first place in its comparison group.

A pure walk (:func:`record_history`) over one group's runs in log order, and the read
(:func:`record_entries`) that feeds it from the runs view. Both are functions of the views
alone, so the history is rebuilt identically from the same events every time.

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
from projections.tables import runs
from projections.view_rows import rank_entry

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


def record_entries(
    session: StoreSession, key: str | None = None, before: int | None = None, limit: int = FEED_MAX
) -> RecordPage:
    """Records of every group (or of group ``key``), newest first: those set before log
    position ``before`` when given, ``limit`` at most.

    Every run of the groups is read, as a record depends on all that came before it in
    its group (a few thousand rows for the whole public catalog).
    """
    query = select(runs).where(runs.c.comparison_key.is_not(None))
    if key is not None:
        query = query.where(runs.c.comparison_key == key)
    rows: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[Arrival]] = {}
    for row in session.execute(query).mappings():
        rows[str(row["run_digest"])] = dict(row)
        arrival = Arrival(int(row["ingested_position"]), rank_entry(row))
        groups.setdefault(str(row["comparison_key"]), []).append(arrival)
    history = [record for group in groups.values() for record in record_history(group)]
    history.sort(key=lambda r: r.position, reverse=True)  # positions are unique in the log
    newest = str(rows[history[0].run]["ingested_at"]) if history else None
    shown = [r for r in history if before is None or r.position < before]
    return RecordPage(
        entries=[
            RecordEntry(r, rows[r.run], None if r.previous is None else rows[r.previous])
            for r in shown[:limit]
        ],
        newest=newest,
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
