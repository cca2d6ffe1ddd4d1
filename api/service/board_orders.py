"""The orders a leaderboard can be read in, over the ledger's one ranking.

The rank is always the ledger's (``domain.ranking``: the value the source claimed, or the
verified reruns). What changes is which runs are shown and in what order:

* ``rank``: every ranked run, by rank;
* ``sol-score``: SOL-ExecBench's own score (higher is better), the order its leaderboard
  shows; a run without one comes last, by rank;
* best per user: each author's best-ranked run only, with how far the next user is behind
  (GPU MODE boards hold many submissions of one user). Runs that name no author each stand
  for themselves.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any

from msgspec import structs

from api.service.models.views import BoardEntry
from ledger.errors import CorruptRecordError
from ledger.ids import run_id
from ledger.run_manifests import INGESTED, ingested_manifests, ingestion_envelope
from ledger.store.read_door import Rows, uuid_param, uuid_result

_CHUNK = 500  # runs per statement (a board in SOL order reads every ranked run's)


class Order(enum.StrEnum):
    RANK = "rank"
    SOL_SCORE = "sol-score"


def sol_score_of(manifests: dict[str, Any] | None) -> float | None:
    """SOL-ExecBench's score of a run, from its run manifest's source-native metrics."""
    run = (manifests or {}).get("run") or {}
    native = (run.get("spec") or {}).get("sourceNative") or {}
    value = (native.get("metrics") or {}).get("sol_score")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def sol_scores(rows: Rows, digests: Sequence[str]) -> dict[str, float | None]:
    """SOL-ExecBench's score of each run of ``digests`` (``sol_score_of``), read from its
    run manifest as ``Ledger.run_manifests`` gives it: the one its ingestion (the run's first
    event) carries, which no later event replaces (only an implementation or a workload can
    be attached). One statement a chunk of runs, on either door (``Rows``); each ingestion
    read as ``ledger.run_manifests`` reads it. A run the log does not hold has none; an
    ingestion that no longer decodes fails closed."""
    found: dict[str, float | None] = dict.fromkeys(digests)
    ids = {run_id(d): d for d in found}
    chunks = list(ids)
    for start in range(0, len(chunks), _CHUNK):
        chunk = [uuid_param(rows.dialect, i) for i in chunks[start : start + _CHUNK]]
        for aggregate, position, topic, state in rows.rows("run_ingestions", aggregates=chunk):
            aggregate_id = uuid_result(aggregate)
            digest = ids[aggregate_id]
            try:
                if topic != INGESTED:
                    raise CorruptRecordError(topic)
                envelope = ingestion_envelope(aggregate_id, bytes(state))
                manifests = ingested_manifests(aggregate_id, envelope)
            except CorruptRecordError:
                raise CorruptRecordError(
                    f"the stored ingestion of run {digest} (at position {position}) cannot be "
                    "read; run 'kernelindex history' or 'kernelindex audit' to see why"
                ) from None
            found[digest] = sol_score_of(manifests)
    return found


def ordered(entries: Sequence[BoardEntry], order: Order) -> list[BoardEntry]:
    """``entries`` (in rank order) in ``order``; ties keep rank order."""
    if order is Order.SOL_SCORE:
        return sorted(
            entries, key=lambda e: (e.sol_score is None, -(e.sol_score or 0.0), e.rank, e.run)
        )
    return list(entries)


def best_per_user(entries: Sequence[BoardEntry]) -> list[BoardEntry]:
    """Each author's first entry of ``entries`` (already in the order shown), with the
    number of the author's runs and the next user's value ÷ this one's."""
    counts: dict[str, int] = {}
    for e in entries:
        if e.author:
            counts[e.author] = counts.get(e.author, 0) + 1
    kept: list[BoardEntry] = []
    seen: set[str] = set()
    for e in entries:
        if e.author:
            if e.author in seen:
                continue
            seen.add(e.author)
        kept.append(structs.replace(e, runs_of_author=counts.get(e.author or "", 1)))
    return [
        structs.replace(e, gap_to_next=_gap(e, kept[i + 1]) if i + 1 < len(kept) else None)
        for i, e in enumerate(kept)
    ]


def _gap(entry: BoardEntry, following: BoardEntry) -> float | None:
    return float(following.value) / float(entry.value) if entry.value else None


def placed(entries: Sequence[BoardEntry], first_place: int) -> list[BoardEntry]:
    return [structs.replace(e, place=first_place + i) for i, e in enumerate(entries)]
