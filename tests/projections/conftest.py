"""The projection tests' worlds: a ledger with its keys registered, and with the demo cohort."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from projection_world import World


@pytest.fixture
def world(db_url: str) -> Iterator[World]:
    w = World.create(db_url)
    yield w
    w.close()


@pytest.fixture
def cohort(world: World) -> World:
    world.ingest()
    return world
