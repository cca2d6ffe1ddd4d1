"""The access line's direct road (observability.access_line) writes the bytes structlog's
bound logger writes for the same fields, in both formats, and steps aside when the
configuration it was built for has changed."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.server import observability

_STAMP = re.compile(r'"timestamp": "[^"]*"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z')


@pytest.fixture
def restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    config = structlog.get_config()
    yield
    root.handlers, root.level = handlers, level
    structlog.configure(**config)
    observability._access_road = None
    structlog.contextvars.clear_contextvars()


def _both(fields: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    capsys.readouterr()
    observability._access.info("request", **dict(fields))
    reference = capsys.readouterr().err
    observability.access_line(**dict(fields))
    direct = capsys.readouterr().err
    # The two lines were stamped microseconds apart: compare everything else, byte for byte.
    return _STAMP.sub("<stamp>", reference), _STAMP.sub("<stamp>", direct)


_text = st.text(max_size=40)  # non-ASCII, quotes, control characters, surrogates' neighbours
_fields = st.fixed_dictionaries(
    {
        "method": st.one_of(st.none(), _text),
        "path": st.one_of(st.none(), _text),
        "status": st.integers(min_value=100, max_value=599),
        "duration_ms": st.floats(allow_nan=True, allow_infinity=True),
        "client": st.one_of(st.none(), _text),
    }
)


@pytest.mark.usefixtures("restored")
@pytest.mark.parametrize("json_logs", [True, False])
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=_fields, request_id=st.text(min_size=1, max_size=20))
def test_the_direct_line_is_the_bound_loggers_line(
    json_logs: bool,
    fields: dict[str, Any],
    request_id: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    observability.configure_logging(json_logs=json_logs)
    assert observability._access_road is not None
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(request_id=request_id)
    reference, direct = _both(fields, capsys)
    assert direct == reference
    assert "<stamp>" in direct


@pytest.mark.usefixtures("restored")
def test_another_context_variable_is_in_both_lines(capsys: pytest.CaptureFixture[str]) -> None:
    observability.configure_logging(json_logs=True)
    structlog.contextvars.bind_contextvars(request_id="r1", user="ü")
    reference, direct = _both({"method": "GET", "status": 200}, capsys)
    assert direct == reference and '"user": "\\u00fc"' in direct


@pytest.mark.usefixtures("restored")
def test_a_processor_list_edited_in_place_is_run_by_both_roads_alike(
    capsys: pytest.CaptureFixture[str],
) -> None:
    observability.configure_logging(json_logs=True)
    road = observability._access_road
    assert road is not None

    def tag(_: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        event_dict["tagged"] = True
        return event_dict

    road.chain.insert(0, tag)  # edited in place, as structlog.testing.capture_logs does
    reference, direct = _both({"method": "GET", "status": 200}, capsys)
    assert direct == reference and '"tagged": true' in direct


@pytest.mark.usefixtures("restored")
def test_above_info_no_access_line(capsys: pytest.CaptureFixture[str]) -> None:
    observability.configure_logging(json_logs=True, level=logging.WARNING)
    assert observability._access_road is None
    capsys.readouterr()
    observability.access_line(method="GET", status=200)
    assert capsys.readouterr().err == ""


@pytest.mark.usefixtures("restored")
def test_json_dumps_with_options_is_json_dumps() -> None:
    value = {"a": [1.5, float("inf"), "ü", None], "b": object()}
    assert observability._json_dumps(value, default=repr) == __import__("json").dumps(
        value, default=repr
    )
    assert observability._json_dumps({"b": 1, "a": 2}, sort_keys=True) == '{"a": 2, "b": 1}'
