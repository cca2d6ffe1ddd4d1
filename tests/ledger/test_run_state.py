"""``Ledger.run_state``: a run without its attestations. Agents' polls, ``kernelindex
attest``, ingestion's intake, submissions and imports read a run through it, so none of
them slows down when anyone floods a run with notes. (That it says what the whole run's
replay says, over random event sequences, is held in tests/projections/test_rebuild_property.)
"""

from __future__ import annotations

from typing import Any

import pytest
from decoded_events import decode_counter
from test_transparency_log import SEED_NAME, SEED_RUN, World, world  # noqa: F401 - fixture

from ledger.signing.authoring import attestation_envelope


def test_reading_a_flooded_runs_state_decodes_none_of_its_notes(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    measure = decode_counter(world.ledger.mapper, monkeypatch)

    def read() -> tuple[int, Any]:
        def state() -> Any:
            found = world.ledger.run_state(SEED_RUN)
            assert found is not None
            return (found.run_name, found.manifests(), found.retracted, found.jobs)

        return measure(state)

    before = read()
    assert before[1][0] == SEED_NAME
    world.ledger.append_many(
        [
            attestation_envelope(SEED_RUN, SEED_NAME, world.attester, type_="note", body=f"{i}")
            for i in range(120)
        ]
    )
    assert read() == before
    assert world.ledger.run_state("sha256:" + "0" * 64) is None
