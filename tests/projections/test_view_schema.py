"""The read models own their tables (projections.tables.VIEWS_VERSION): views another build
made are refolded from the log on first use, identically; the ledger's schema has none of
them. On SQLite and PostgreSQL."""

from __future__ import annotations

from projection_world import World
from sqlalchemy import create_engine, inspect, update

from ledger.store.schema import upgrade
from projections import runner as runner_module
from projections.runner import ProjectionRunner, prepare_views
from projections.tables import VIEWS_VERSION, metadata, view_schema


def _forget_ensured() -> None:
    runner_module._ENSURED.clear()  # as a new process would find it


def test_views_of_another_build_are_refolded_identically(cohort: World, db_url: str) -> None:
    runner = ProjectionRunner(cohort.ledger)
    runner.catch_up()
    folded = runner.table_digests()
    engine = create_engine(db_url)
    with engine.begin() as conn:  # a build with another views version made these
        conn.execute(update(view_schema).values(version=VIEWS_VERSION - 1))
    engine.dispose()
    _forget_ensured()
    again = ProjectionRunner(cohort.ledger)
    assert again.catch_up().events > 0  # dropped and folded again from the log
    assert again.table_digests() == folded
    _forget_ensured()
    assert ProjectionRunner(cohort.ledger).catch_up().events == 0  # stamped: once only


def test_the_ledger_schema_makes_no_view_and_the_views_make_their_own(empty_db_url: str) -> None:
    upgrade(empty_db_url)
    engine = create_engine(empty_db_url)
    views = {t.name for t in metadata.sorted_tables}
    assert not views & set(inspect(engine).get_table_names())
    assert prepare_views(empty_db_url) is True
    assert views <= set(inspect(engine).get_table_names())
    assert prepare_views(empty_db_url) is False  # idempotent
    engine.dispose()
