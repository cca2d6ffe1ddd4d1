"""What folding a run's state event costs does not grow with the run's attestations (issue 32:
one agent result on a run with 15,000 notes re-read them all under the folders' lock).

Counted, not timed: every stored event the fold decodes is either its fold fields, decoded
by ``decode_fields``, or (an event with none) passes its field reader first."""

from __future__ import annotations

from typing import Any
from unittest import mock

from projection_world import CLAIMED, RUN_15149, SEED, World
from test_crash import fresh_rebuild

from ledger.store.event_fields import EventFields
from ledger.store.fold_fields import FoldFields, decode_fields
from projections import run_views
from projections.runner import ProjectionRunner

NOTES = 40


class CountingReader:
    """The runner's field reader, counting the stored events it is handed."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.rows = 0

    def read(self, topic: str, state: bytes) -> EventFields | None:
        self.rows += 1
        found: EventFields | None = self.reader.read(topic, state)
        return found

    def decode(self, data: bytes) -> FoldFields:
        self.rows += 1
        return decode_fields(data)


def _rows_read_folding_a_result(world: World, run: str) -> int:
    """Stored events decoded by the catch-up that folds one agent result on ``run`` (its
    request and claim folded before)."""
    job = world.request_rerun(run)
    result = world.result_envelope(job, ns=1.05 * CLAIMED[run])  # claims the job first
    ProjectionRunner(world.ledger).catch_up()
    world.append(result)
    runner = ProjectionRunner(world.ledger)
    counting = CountingReader(runner._reader)
    runner._reader = counting  # type: ignore[assignment]
    with mock.patch.object(run_views, "decode_fields", counting.decode):
        assert runner.catch_up().events == 1
    return counting.rows


def test_folding_a_rerun_result_reads_the_same_however_many_attestations(cohort: World) -> None:
    noted = cohort.ledger.append_many(
        [cohort.attest_envelope(RUN_15149, f"note {i}") for i in range(NOTES)]
    )
    assert all(not isinstance(r, Exception) for r in noted)
    ProjectionRunner(cohort.ledger).catch_up()
    quiet = _rows_read_folding_a_result(cohort, SEED)
    noisy = _rows_read_folding_a_result(cohort, RUN_15149)
    # The result itself, then the run's state events: ingestion, request, claim, result.
    assert quiet == noisy == 5
    # And what it folded is what folding every event gives (attestations still counted).
    row = cohort.row(RUN_15149)
    assert (row.attestations, row.reruns) == (NOTES, 1)
    assert row.rerun_median_ns == 1.05 * CLAIMED[RUN_15149]
    incremental = cohort.runner().table_digests()
    assert incremental == fresh_rebuild(cohort)
