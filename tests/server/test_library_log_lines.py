"""A library's own log records (SQLAlchemy's pool, uvicorn) are lines of the server's log:
in JSON mode one JSON object per line, an exception as data, never a multi-line traceback
that breaks the log's one-object-per-line shape (the PostgreSQL fault test reads it)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from served_app import Served

from api.server.observability import configure_logging


@pytest.fixture
def restored_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers, root.level = handlers, level


@pytest.mark.usefixtures("restored_root")
def test_a_library_error_with_its_exception_is_one_json_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(json_logs=True)
    configure_logging(json_logs=True)  # configured twice (an app made twice): one line still
    try:
        raise ConnectionError("terminating connection due to administrator command")
    except ConnectionError:
        logging.getLogger("sqlalchemy.pool.impl.QueuePool").error(
            "Exception during reset or similar", exc_info=True
        )
    logging.getLogger("sqlalchemy.engine").info("below the level: not shown")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    record = json.loads(lines[0])
    assert record["event"] == "Exception during reset or similar"
    assert record["level"] == "error" and record["logger"] == "sqlalchemy.pool.impl.QueuePool"
    (raised,) = record["exception"]
    assert raised["exc_type"] == "ConnectionError"
    assert "administrator command" in raised["exc_value"]
    assert "Traceback" not in lines[0]


@pytest.mark.usefixtures("restored_root")
def test_console_logs_keep_the_traceback_for_a_person(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(json_logs=False)
    try:
        raise ConnectionError("gone")
    except ConnectionError:
        logging.getLogger("some.library").warning("it failed", exc_info=True)
    err = capsys.readouterr().err
    assert "it failed" in err and "ConnectionError: gone" in err


@pytest.mark.usefixtures("restored_root")
def test_the_served_app_leaves_the_log_ours(served_sqlite: Served) -> None:
    """Made and started as `serve` makes it, the app leaves library records to our one
    handler (configure_logging's, tested above: in JSON mode one object a line). A web
    framework's default logging config once replaced it, and such records (SQLAlchemy's
    pool discarding a connection PostgreSQL ended) came out as text with a traceback in
    the middle of a JSON log: the PostgreSQL fault test's rare failure."""
    assert served_sqlite.client.get("/v1/log/checkpoint").status_code == 200
    # pytest's own capturing handlers aside: the ones a served process has.
    handlers = [
        h for h in logging.getLogger().handlers if not type(h).__module__.startswith("_pytest")
    ]
    assert [h.get_name() for h in handlers] == ["kernelindex-stdlib"], handlers
    assert not logging.getLogger("sqlalchemy.pool").handlers
