"""The append path's shortcuts agree with the general roads: the reply built from a receipt's
typed fields equals the one its JSON document converts to, field for field and byte for byte
once encoded; the access log's line is the configured processors' line (the logger is bound
once per configuration); the plain JSON media type is what Litestar's parse reads as JSON."""

from __future__ import annotations

import json
import uuid
from typing import Any

import msgspec
import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st
from litestar import Request

from api.server import observability
from api.server.app import _json_media_type, _plain_json
from api.server.controllers.common import receipt_body
from api.service.models import to_response
from api.service.models.log import Receipt
from ledger.logged_event import LoggedEvent
from ledger.store.transparency_log import InclusionProof

_hashes = st.lists(st.binary(min_size=32, max_size=32), max_size=40).map(tuple)
_proofs = st.builds(
    InclusionProof,
    leaf_index=st.integers(0, 2**53),
    tree_size=st.integers(1, 2**53),
    root=st.binary(min_size=32, max_size=32),
    hashes=_hashes,
)
_text = st.text(max_size=80)
_receipts = st.builds(
    LoggedEvent,
    position=st.integers(1, 2**53),
    aggregate_id=st.uuids(),
    version=st.integers(1, 2**31),
    event=_text,
    subject_digest=_text,
    envelope_digest=_text,
    received_at=_text,
    duplicate=st.booleans(),
    inclusion=st.none() | _proofs,
    signer=_text,
)


@given(_receipts)
def test_receipt_body_is_the_converted_document(receipt: LoggedEvent) -> None:
    direct = receipt_body(receipt)
    converted = to_response(receipt.to_json(), Receipt)
    assert direct == converted
    assert msgspec.json.encode(direct) == msgspec.json.encode(converted)


def test_receipt_without_proof_says_null() -> None:
    receipt = LoggedEvent(1, uuid.uuid4(), 1, "Run.Attested", "s", "e", "t", False)
    assert json.loads(msgspec.json.encode(receipt_body(receipt)))["log"] is None


def test_access_logger_follows_the_configuration(capsys: object) -> None:
    """Configured twice (an app made twice, a format changed): the bound access logger is
    the latest configuration's, writing the lines structlog's proxy would."""
    observability.configure_logging(json_logs=False)
    observability.configure_logging(json_logs=True)
    structlog.contextvars.bind_contextvars(request_id="r1")
    try:
        observability._access.info("request", method="POST", status=201)
        structlog.get_logger("kernelindex.access").info("request", method="POST", status=201)
    finally:
        structlog.contextvars.clear_contextvars()
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    bound, proxied = (json.loads(line) for line in err.splitlines()[-2:])
    for line in (bound, proxied):
        line.pop("timestamp")
    assert (
        bound
        == proxied
        == {
            "method": "POST",
            "status": 201,
            "event": "request",
            "request_id": "r1",
            "level": "info",
        }
    )


@pytest.mark.parametrize(
    "values",
    [
        [b"application/json"],
        [b"Application/JSON"],
        [b"application/json; charset=utf-8"],
        [b"application/dsse+json"],
        [b"text/plain"],
        [b""],
        [],
        [b"application/json", b"text/plain"],
        [b"text/plain", b"application/json"],
    ],
)
def test_the_plain_json_header_is_what_litestar_reads_as_json(values: list[bytes]) -> None:
    """The media-type check's shortcut (one plain ``application/json`` header) is taken only
    where Litestar's own parse of the header reads JSON too."""
    scope: Any = {
        "type": "http",
        "method": "POST",
        "path": "/v1/runs",
        "headers": [(b"content-type", v) for v in values],
        "state": {},
    }
    if _plain_json(scope):
        assert _json_media_type(Request(scope))
    assert _plain_json(scope) == (values == [b"application/json"])
