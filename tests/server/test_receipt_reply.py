"""The append path's shortcuts agree with the general roads: the reply built from a receipt's
typed fields equals the one its JSON document converts to, field for field and byte for byte
once encoded; the access log's line is the configured processors' line (the logger is bound
once per configuration); the plain JSON media type is what Litestar's parse reads as JSON."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import msgspec
import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st
from litestar import Request, Response
from litestar.background_tasks import BackgroundTask
from litestar.datastructures import Cookie
from litestar.response.base import ASGIResponse
from served_app import Served
from test_api_writes import SEED, SEED_NAME, check_receipt, register_attester

from api.server import observability
from api.server.app import _json_media_type, _plain_json
from api.server.controllers import common
from api.server.controllers.common import ReceiptResponse, receipt_body, receipt_reply
from api.service.models import to_response
from api.service.models.log import Receipt
from ledger.logged_event import LoggedEvent
from ledger.signing.authoring import attestation_envelope
from ledger.signing.keys import SigningKey
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


async def _messages(reply: Any) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "http.disconnect"}

    await reply({"type": "http"}, receive, send)
    return sent


@given(_receipts, st.sampled_from(["", "application/json"]), st.sampled_from([None, {}, 1]))
def test_receipt_response_sends_what_litestar_sends(
    receipt: LoggedEvent, media_type: str, encoders: Any
) -> None:
    """The write reply's own road (``ReceiptResponse``) sends the very messages Litestar's
    ``Response``/``ASGIResponse`` send for it, called as Litestar's response handler calls
    them (its arguments as a served write's: a media type of "", the app's type encoders):
    status, headers (names, order, bytes) and body. A Location that is not ASCII (never a
    digest's) goes Litestar's way, which refuses what latin-1 cannot spell."""
    fast = receipt_reply(receipt, receipt_body(receipt))
    assert isinstance(fast, ReceiptResponse)
    general = Response(fast.content, status_code=fast.status_code, headers=dict(fast.headers))
    kwargs: dict[str, Any] = {
        "app": None,
        "request": None,
        "background": None,
        "cookies": [],
        "headers": {},
        "media_type": media_type,
        "status_code": 201,
        "type_encoders": {str: str} if encoders == 1 else encoders,
    }
    try:
        theirs = asyncio.run(_messages(general.to_asgi_response(**kwargs)))
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            fast.to_asgi_response(**kwargs)
        return
    ours = fast.to_asgi_response(**kwargs)
    location = fast.headers["Location"]
    assert isinstance(ours, ASGIResponse) == (not location.isascii())  # else its own road
    assert asyncio.run(_messages(ours)) == theirs


def test_receipt_response_leaves_the_unusual_to_litestar(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Anything but the plain case (a cookie, a header from the route, another media type,
    a HEAD, a background task, another status) is handed to Litestar's own road as given."""
    handed: list[dict[str, Any]] = []

    def litestar_road(self: Any, app: Any, request: Any, **kwargs: Any) -> Any:
        handed.append(kwargs)
        return "litestar's"

    monkeypatch.setattr(Response, "to_asgi_response", litestar_road)
    receipt = LoggedEvent(1, uuid.uuid4(), 1, "Run.Attested", "s", "e", "t", False)
    unusual: list[dict[str, Any]] = [
        {"cookies": [Cookie(key="a", value="b")]},
        {"headers": {"x-extra": "1"}},
        {"media_type": "application/msgpack"},
        {"is_head_response": True},
        {"background": BackgroundTask(print)},
        {"encoded_headers": [(b"x", b"y")]},
    ]
    for kwargs in unusual:
        fast = receipt_reply(receipt, receipt_body(receipt))
        assert fast.to_asgi_response(app=None, request=None, **kwargs) == "litestar's"
    for change in ("status", "cookie", "header", "media"):
        fast = receipt_reply(receipt, receipt_body(receipt))
        if change == "status":
            fast.status_code = 202
        elif change == "cookie":
            fast.set_cookie("a", "b")
        elif change == "header":
            fast.headers["x-extra"] = "1"
        else:
            fast.media_type = "application/msgpack"
        assert fast.to_asgi_response(app=None, request=None) == "litestar's"
    assert len(handed) == len(unusual) + 4


def test_served_write_replies_take_the_receipt_road(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the app: a write's reply goes the receipt's own road, and the duplicate's
    reply through it equals the one Litestar's ``Response`` gives (headers and body)."""
    roads: list[bool] = []
    real = ReceiptResponse.to_asgi_response

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        made = real(self, *args, **kwargs)
        roads.append(not isinstance(made, ASGIResponse))
        return made

    monkeypatch.setattr(ReceiptResponse, "to_asgi_response", spy)
    alice = SigningKey.generate()
    register_attester(served, alice)
    envelope = attestation_envelope(SEED, SEED_NAME, alice, type_="note", body="road")
    url, headers = f"/v1/runs/{SEED}/attestations", {"x-request-id": "same-request-id"}
    check_receipt(served.client.post(url, json=envelope, headers=headers), envelope)
    ours = served.client.post(url, json=envelope, headers=headers)
    assert roads == [True, True, True]  # the key's registration, the attestation, again
    monkeypatch.setattr(common, "ReceiptResponse", Response)
    theirs = served.client.post(url, json=envelope, headers=headers)
    assert roads == [True, True, True]
    assert ours.status_code == theirs.status_code == 200
    assert ours.headers.multi_items() == theirs.headers.multi_items()
    assert ours.content == theirs.content
