"""A leaderboard page read through the driver (``DriverRows``, what a short command opens)
is the page the service reads on its SQLAlchemy connection (``SessionRows``): every view,
evidence floor, page, order and per-user choice, on every group of the cohort, refusals
included; SQLite and PostgreSQL (issue 33). The two doors run one function, so what can
differ is what the drivers hand back: types, NULLs, bytes, the order of rows."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from projection_world import World
from sqlalchemy import create_engine

from api.service.board_orders import Order
from api.service.board_pages import board_page, group_summaries
from domain.errors import DomainError
from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.store.read_door import SessionRows, open_driver
from projections import view_reads


def _answer(read: Any) -> tuple[str, Any]:
    try:
        return "ok", read()
    except DomainError as exc:
        return type(exc).__name__, str(exc)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    group=st.integers(0, 20),
    view=st.sampled_from(View),
    floor=st.none() | st.sampled_from(EvidenceLevel),
    start=st.integers(1, 4),
    limit=st.integers(1, 3),
    order=st.sampled_from(Order),
    per_user=st.booleans(),
    gpu=st.sampled_from([None, "B200", "h100", "no-such-gpu"]),
)
def test_the_driver_reads_the_page_the_service_reads(
    cohort: World,
    group: int,
    view: View,
    floor: EvidenceLevel | None,
    start: int,
    limit: int,
    order: Order,
    per_user: bool,
    gpu: str | None,
) -> None:
    cohort.runner().catch_up()
    door = open_driver(cohort.db_url)
    assert door is not None and view_reads.views_fresh(door)
    engine = create_engine(cohort.db_url)
    try:
        with engine.connect() as conn:
            session = SessionRows(conn)
            keys = [g.comparison_key for g in view_reads.groups(session)]
            assert keys
            key = keys[group % len(keys)]
            assert _answer(
                lambda: board_page(door, key, view, start, limit, floor, order, per_user)
            ) == _answer(
                lambda: board_page(session, key, view, start, limit, floor, order, per_user)
            )
            assert _answer(lambda: group_summaries(door, None, gpu)) == _answer(
                lambda: group_summaries(session, None, gpu)
            )
    finally:
        door.close()
        engine.dispose()
