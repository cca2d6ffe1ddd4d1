"""The schema's upgrade steps read stored events by the topic they are stored under, named
in ``ledger.store.schema`` as a stored value (the store does not import the aggregates):
that name must be the topic an ingestion is stored under. On SQLite and PostgreSQL."""

from __future__ import annotations

from test_transparency_log import SEED_RUN, World, world  # noqa: F401 - fixture

from domain.event_names import EventName
from ledger.aggregates import run_id, topic_of
from ledger.store.schema import INGESTED_TOPIC


def test_the_upgrade_steps_name_the_topic_ingestions_are_stored_under(world: World) -> None:
    (ingestion,) = world.ledger.stored_records(run_id(SEED_RUN), version=1)
    assert ingestion.topic == INGESTED_TOPIC == topic_of(EventName.RUN_INGESTED)
