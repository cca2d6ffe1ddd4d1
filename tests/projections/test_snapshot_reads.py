"""A read of the views is one database snapshot: a write (and its fold) that lands between two
queries of one read is not seen by the second, and the read is neither retried nor refused
however often that happens (issue 32: reads starved, 503, under a few writes a second).

The writer runs in another thread, so on its own connection and transaction, as another
request or process would."""

from __future__ import annotations

import threading
from typing import Any

from projection_world import CLAIMED, GROUP, RUN_15149, SEED, World
from sqlalchemy import func, select

from domain.ranking import View
from ledger.store.event_store import StoreSession
from projections import queries, view_reads
from projections.runner import ProjectionRunner
from projections.tables import runs, stale_groups


def _in_another_thread(work: Any) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # reported to the test, not lost in the thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive() and errors == []


def _totals(session: StoreSession) -> tuple[int, int]:
    found = session.execute(select(func.count(), func.sum(runs.c.attestations))).one()
    return int(found[0]), int(found[1] or 0)


def _rows(session: StoreSession) -> list[tuple[str, int]]:
    found = session.execute(
        select(runs.c.run_digest, runs.c.attestations).order_by(runs.c.run_digest)
    )
    return [(str(r[0]), int(r[1])) for r in found]


def test_a_write_folded_between_two_queries_of_a_read_is_not_seen_by_it(cohort: World) -> None:
    """Every time the read runs, another writer appends an attestation and folds it between
    its two queries: the read answers once, its count and rows agree, as of its start."""
    runner = ProjectionRunner(cohort.ledger)
    runner.catch_up()
    calls = 0

    def write_and_fold() -> None:
        cohort.append(cohort.attest_envelope(SEED, f"mid-read note {calls}"))
        ProjectionRunner(cohort.ledger).catch_up()

    def read(session: StoreSession) -> tuple[tuple[int, int], list[tuple[str, int]]]:
        nonlocal calls
        calls += 1
        totals = _totals(session)
        _in_another_thread(write_and_fold)
        return totals, _rows(session)

    before = cohort.tracking_position()
    position, ((count, attestations), rows) = runner.snapshot(read)
    assert calls == 1  # answered from its one snapshot, not read again
    assert position == before
    assert count == len(rows) == 4 and attestations == sum(a for _, a in rows) == 0
    # The write it did not see was committed and folded all the same.
    after, (_, now) = runner.snapshot(lambda session: ((), _totals(session)))
    assert after > before and now == (4, 1)


def test_a_read_under_a_stream_of_folded_writes_is_never_refused(cohort: World) -> None:
    """Twelve writes land during one read (more than any retry budget): it still answers."""
    runner = ProjectionRunner(cohort.ledger)
    runner.catch_up()

    def read(session: StoreSession) -> list[tuple[int, int]]:
        seen = []
        for i in range(12):
            seen.append(_totals(session))
            _in_another_thread(
                lambda i=i: (
                    cohort.append(cohort.attest_envelope(RUN_15149, f"note {i}")),
                    ProjectionRunner(cohort.ledger).catch_up(),
                )
            )
        return seen

    _, seen = runner.snapshot(read)
    assert seen == [(4, 0)] * 12
    assert cohort.row(RUN_15149).attestations == 12


def test_a_read_that_finds_groups_left_to_rerank_answers_them_ranked(cohort: World) -> None:
    """A folder stopped between its batches (or a long catch-up is under way) has left a
    group marked to re-rank: the read answers with the group ranked as its runs stand, once,
    rather than with ranks that disagree with the runs or a refusal."""
    ProjectionRunner(cohort.ledger).catch_up()
    cohort.append(cohort.result_envelope(cohort.request_rerun(SEED), ns=1.09 * CLAIMED[SEED]))
    folder = ProjectionRunner(cohort.ledger)
    folder._rerank_stale = lambda: None  # type: ignore[method-assign]  # it stops here
    folder.catch_up(batch=1)
    with cohort.ledger.store.transaction(commit=False) as session:
        marked = list(session.execute(select(stale_groups.c.comparison_key)).scalars())
    assert marked == [GROUP]
    calls = 0

    def read(session: StoreSession) -> tuple[list[Any], list[Any]]:
        nonlocal calls
        calls += 1
        board = view_reads.leaderboard(queries.rows_of(session), GROUP, View.VERIFIED)
        level = session.execute(
            select(runs.c.run_digest).where(runs.c.evidence_level == "verified")
        ).scalars()
        return [(r.run_digest, r.rank) for r in board], list(level)

    _, (board, verified) = ProjectionRunner(cohort.ledger).snapshot(read)
    assert calls == 1
    assert verified == [SEED] and board == [(SEED, 1)]
