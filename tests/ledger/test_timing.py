"""The ledger's timing hooks (``ledger.timing``): off, they record nothing; on, every stage of
an append is seen, nested and balanced, as the benchmark's breakdown reads them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ledger import timing
from ledger.signing.authoring import attestation_envelope, ingestion_envelope
from ledger.timing import Stage
from tests.ledger.test_admission import SEED_NAME, World, world  # noqa: F401 - the fixture


class Recorder:
    def __init__(self) -> None:
        self.open: list[Stage] = []
        self.seen: list[tuple[Stage, int, bool]] = []  # stage, depth, raised
        self.notes: list[tuple[str, float]] = []

    def begin(self, stage: Stage) -> object:
        self.open.append(stage)
        return len(self.open)

    def end(self, stage: Stage, began: object, raised: bool) -> None:
        assert self.open and self.open[-1] is stage, "stages end in the order they began"
        assert began == len(self.open)
        self.open.pop()
        self.seen.append((stage, len(self.open), raised))

    def note(self, name: str, value: float) -> None:
        self.notes.append((name, value))


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    probe = Recorder()
    timing.install(probe)
    yield probe
    timing.install(None)


def test_every_stage_of_an_append_is_seen_inside_its_group(
    world: World, recorder: Recorder
) -> None:
    receipt = world.ledger.append(
        ingestion_envelope(world.seed, world.ingester, now=world.clock.now)
    )
    world.ledger.append(
        attestation_envelope(
            receipt.subject_digest,
            SEED_NAME,
            world.attester,
            type_="note",
            body="b",
            now=world.clock.now,
        )
    )
    stages = {stage for stage, _, _ in recorder.seen}
    assert stages == set(Stage)
    assert not recorder.open
    groups = [depth for stage, depth, _ in recorder.seen if stage is Stage.GROUP]
    assert groups == [0, 0]  # every other stage ran inside a group
    assert all(depth > 0 for stage, depth, _ in recorder.seen if stage is not Stage.GROUP)
    assert recorder.notes == [(timing.GROUP_SIZE, 1), (timing.GROUP_SIZE, 1)]


def test_a_refused_envelope_marks_the_stage_that_refused_it(
    world: World, recorder: Recorder
) -> None:
    results = world.ledger.append_many([{"payload": "not an envelope"}])
    assert len(results) == 1
    assert (Stage.PARSE, 1, True) in recorder.seen


def test_without_a_probe_nothing_is_recorded(world: World) -> None:
    probe = Recorder()
    timing.install(probe)
    timing.install(None)
    world.ledger.append(ingestion_envelope(world.seed, world.ingester, now=world.clock.now))
    assert probe.seen == [] and probe.notes == []
