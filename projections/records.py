"""The history of #1 records: every time a run took first place in its comparison group.

A pure walk (:func:`record_history`) over one group's runs in date order, which the fold
runs whenever it re-ranks a group and keeps in the records view, and the read
(:func:`record_entries`) of a page of that view, newest first. Both are functions of the
views alone, so the history is rebuilt identically from the same events every time.

What "took first place" means is the ranking's own decision (``domain.ranking``,
source-native view): a run sets a record when, ranked against the standing #1 alone, it
gets the better rank. Equal values share a rank, so matching the record is not beating it.

When: a run is dated by what its source says (``observedAt``, the date the result was
measured; the KernelIndex catalog dates its record events so), else by the ledger's
admission of it. The walk follows those dates, not the order the ledger happened to take the
runs in: importing a source's old results after newer ones rewrites the group's history as
the source lived it, and each record carries its date and what that date is.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from msgspec.structs import replace
from sqlalchemy import Select, and_, or_, select, tuple_

from domain.errors import DomainError
from domain.ranking import RankedEntry, RankEntry, RankingError, View, rank_group
from domain.timestamps import format_time, parse_time
from ledger.store.event_store import StoreSession
from projections.group_labels import GroupLabel, group_labels
from projections.queries import rows_of
from projections.tables import ranks, records, runs

# Records are those of the board a group's #1 is read from (``queries.leaders``).
VIEW = View.SOURCE_NATIVE
FEED_MAX = 100
OBSERVED: Final = "observed"  # dated by the source: the run's observedAt
ADMITTED: Final = "admitted"  # dated by the ledger: when it admitted the run


@dataclass(frozen=True)
class Arrival:
    """One run of a comparison group as the views hold it now, where the log put it, the
    date its source gave (``observed``, None: none) and when the ledger admitted it."""

    position: int  # ingested_position: the run's place in the log
    entry: RankEntry
    observed: str | None = None
    admitted: str = ""

    @property
    def when(self) -> tuple[str, str]:
        """``(date, what it is)``: the source's date in the ledger's form (UTC, ms, Z), else
        the admission time (a source date that is no RFC 3339 date-time counts as none)."""
        if self.observed is not None:
            observed = (
                _known_ledger_form(self.observed)
                if type(self.observed) is str
                else _ledger_form(self.observed)
            )
            if observed is not None:
                return observed, OBSERVED
        return self.admitted, ADMITTED


def _ledger_form(observed: str) -> str | None:
    """A source date in the ledger's form, or None where it is no RFC 3339 date-time."""
    try:
        return format_time(parse_time(observed))
    except (DomainError, ValueError):
        return None


# Memoised on the string (the answer is a function of it alone): every re-rank of a group
# walks all its runs' dates again.
_known_ledger_form = functools.lru_cache(maxsize=16384)(_ledger_form)


@dataclass(frozen=True)
class Record:
    """A run that took #1; ``previous`` is the #1 it displaced (None: the group's first
    ranked run). ``withdrawn`` says "retracted" or "superseded" when that happened to the run
    since: it stays in the history, marked. ``at`` is its date, ``dated`` what that date is
    (:data:`OBSERVED` or :data:`ADMITTED`)."""

    position: int
    run: str
    value: float
    previous: str | None = None
    previous_value: float | None = None
    withdrawn: str | None = None
    at: str = ""
    dated: str = ADMITTED

    @property
    def factor(self) -> float | None:
        """How many times better than the displaced #1: its value ÷ this one's, the
        convention of "compare with #1" (``domain.ranking.compare``: ≥ 1 when the other is
        slower). None for a first record or a zero value."""
        if self.previous_value is None or self.value == 0:
            return None
        return self.previous_value / self.value


def record_history(
    arrivals: Iterable[Arrival], ranked: Iterable[RankedEntry] | None = None
) -> list[Record]:
    """The record-setting sequence of one comparison group, in date order.

    Walks the runs in date order (:attr:`Arrival.when`; runs of one date in log order),
    keeping the standing #1: a run that the ranking puts strictly ahead of it is a record and
    becomes the standing #1; the first ranked run is the group's first record. A run counts
    when the ranking would have ranked it then (``RankEntry.ranked_in``: passed, with a
    primary value).

    What it ignores, because the views do not say *when* it happened:

    * a retraction or supersession: the run is judged as it was (active), so a record
      later retracted stays in the history, marked ``withdrawn``, and later runs still had
      to beat it. The run that inherits #1 when a record is withdrawn is therefore not a
      record of its own; with nothing withdrawn, the last record is the group's current #1
      (among runs tied at #1, the earliest);
    * a run attached to its group later (``Run.ManifestsAttached``): it counts at its date;
    * the verified view, whose values come with reruns long after a run arrives.

    ``ranked``: the group's source-native ranking of these runs as they stand, where the
    caller made it already (a re-ranking has): with nothing withdrawn, the runs as they were
    are the runs as they stand, so it is the board, and the group is not ranked again.
    """
    # Each run's date read once (a source's date is parsed and formatted): for the order,
    # and for the record it may set.
    dated = sorted(((a.when, a) for a in arrivals), key=lambda d: (d[0][0], d[1].position))
    _check([a for _, a in dated])
    # As it was: a retraction or supersession came later, if at all.
    then_of = {
        a.entry.run: (
            replace(a.entry, retracted=False, superseded=False)
            if a.entry.retracted or a.entry.superseded
            else a.entry
        )
        for _, a in dated
    }
    # The group ranked once, every run as it was. In this view ranks are dense by value
    # alone, so a run ranks ahead of the standing #1 in the whole group exactly when it
    # does ranked against it alone (``tests/projections/test_record_history.py`` holds the
    # two equal); runs the ranking leaves out are not in the board.
    if ranked is None or any(a.entry is not then_of[a.entry.run] for _, a in dated):
        ranked = rank_group(then_of.values(), VIEW)
    board = {r.run: r for r in ranked}
    records: list[Record] = []
    best: Record | None = None
    holder: str | None = None
    for (at, dated_by), arrival in dated:
        mine = board.get(arrival.entry.run)
        if mine is None:
            continue  # the ranking would not have ranked it
        if holder is not None and mine.rank >= board[holder].rank:
            continue  # slower, or tied: #1 stays where it was
        best = Record(
            position=arrival.position,
            run=mine.run,
            value=mine.value,
            previous=None if best is None else best.run,
            previous_value=None if best is None else best.value,
            withdrawn=_withdrawn(arrival.entry),
            at=at,
            dated=dated_by,
        )
        records.append(best)
        holder = mine.run
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
    """A record with the runs-view rows of its run and of the #1 it displaced; ``holds``:
    its run is its group's #1 now."""

    record: Record
    run: dict[str, Any]
    previous: dict[str, Any] | None
    holds: bool = False


@dataclass(frozen=True)
class RecordPage:
    entries: list[RecordEntry]  # newest first
    newest: str | None  # the date of the newest record of the whole history (of the scope)
    more: bool  # older records follow the page


@dataclass(frozen=True)
class RecordScope:
    """Which records a page is of (None: any): one group's, or those of runs on one GPU
    (``product``) or by one author."""

    key: str | None = None
    product: str | None = None
    author: str | None = None
    # A project's: runs of these implementations (``projections.projects``).
    implementations: tuple[str, ...] | None = None


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
        "at": record.at,
        "dated": record.dated,
    }


def _record(row: Any) -> Record:
    return Record(
        position=int(row["position"]),
        run=str(row["run_digest"]),
        value=float(row["value"]),
        previous=row["previous_run"],
        previous_value=row["previous_value"],
        withdrawn=row["withdrawn"],
        at=str(row["at"]),
        dated=str(row["dated"]),
    )


def _scoped(scope: RecordScope) -> Select[Any]:
    query = select(records)
    if scope.key is not None:
        query = query.where(records.c.comparison_key == scope.key)
    if scope.product is not None or scope.author is not None or scope.implementations is not None:
        query = query.join(runs, runs.c.run_digest == records.c.run_digest)
        if scope.product is not None:
            query = query.where(runs.c.product == scope.product)
        if scope.author is not None:
            query = query.where(runs.c.author == scope.author)
        if scope.implementations is not None:
            query = query.where(runs.c.implementation_digest.in_(scope.implementations))
    return query


def record_entries(
    session: StoreSession,
    key: str | RecordScope | None = None,
    before: int | None = None,
    limit: int = FEED_MAX,
) -> RecordPage:
    """Records of every group (or of a scope: a group ``key``, a GPU, an author), newest
    first (by date, then log position), ``limit`` at most. ``before``: the log position of
    the last record of the page before (what a next link names): the records after it in
    this order; a position no record of the scope has reads as "admitted before it".

    Read from the records view, which the fold keeps with each group's ranks: a page costs
    its own rows and their runs, whatever the size of the ledger."""
    scope = key if isinstance(key, RecordScope) else RecordScope(key=key)
    query = _scoped(scope)
    newest_first = (records.c.at.desc(), records.c.position.desc())
    top = session.execute(query.order_by(*newest_first).limit(1)).mappings().first()
    page = query
    if before is not None:
        mark = session.execute(query.where(records.c.position == before)).mappings().first()
        if mark is None:
            page = query.where(records.c.position < before)
        else:
            page = query.where(
                or_(
                    records.c.at < mark["at"],
                    and_(records.c.at == mark["at"], records.c.position < before),
                )
            )
    shown = [
        _record(row)
        for row in session.execute(page.order_by(*newest_first).limit(limit + 1)).mappings()
    ][: limit + 1]
    wanted = {r.run for r in shown[:limit]} | {r.previous for r in shown[:limit] if r.previous}
    rows = {
        str(row["run_digest"]): dict(row)
        for row in session.execute(select(runs).where(runs.c.run_digest.in_(sorted(wanted))))
        .mappings()
        .all()
    }
    first = select(ranks.c.run_digest).where(
        ranks.c.view == str(VIEW),
        ranks.c.rank == 1,
        ranks.c.run_digest.in_(sorted({r.run for r in shown[:limit]})),
    )
    holding = {str(d) for d in session.execute(first).scalars()}
    return RecordPage(
        entries=[
            RecordEntry(
                r,
                rows[r.run],
                None if r.previous is None else rows[r.previous],
                r.run in holding and r.withdrawn is None,
            )
            for r in shown[:limit]
        ],
        newest=None if top is None else str(top["at"]),
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
    rows = rows_of(session)
    shown = {label.key: label for label in group_labels(rows, sorted(set(keys)))}
    pairs = sorted({(lb.benchmark, lb.product) for lb in shown.values()}, key=str)
    alike: set[str] = set(shown)
    if pairs:
        query = select(runs.c.comparison_key).where(
            runs.c.comparison_key.is_not(None),
            tuple_(runs.c.benchmark, runs.c.product).in_(pairs),
        )
        alike |= {str(k) for k in session.execute(query.distinct()).scalars()}
    everyone = group_labels(rows, sorted(alike))
    return {key: _name(label, label.lookalikes(everyone)) for key, label in shown.items()}


def _name(label: GroupLabel, alike: list[GroupLabel]) -> GroupName:
    short = f"{label.benchmark or 'unknown operation'} on {label.product or 'unknown GPU'}"
    apart = label.short_apart(alike) if alike else ""
    return GroupName(short + (f" · {apart}" if apart else ""), label.separated_by([]))
