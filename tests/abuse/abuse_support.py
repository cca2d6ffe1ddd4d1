"""What the abuse tests share: problem checks, counting what was appended, signing helpers.

The served app itself is tests/served_app.py, shared with tests/server. "Nothing appended" is
checked two ways: the transparency log's tree size (what /health reports) and the number of
stored events (what the database holds).
"""

from __future__ import annotations

import base64
from typing import Any

from served_app import TEST_CONFIG, Served, serve
from sqlalchemy import func, select

from api.server.config import ServerConfig
from domain.rerun_binding import DeviceClass
from domain.statements import PAYLOAD_TYPE, Role
from ledger.application import Ledger
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.dsse import pae
from ledger.signing.keys import SigningKey

__all__ = ["TEST_CONFIG", "Served", "serve"]  # re-exported for the abuse tests

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SEED_NAME = "sol-submission-38823"
PROBLEM = "application/problem+json"


def with_config(**changes: Any) -> ServerConfig:
    return ServerConfig(**(TEST_CONFIG.__dict__ | changes))


def problem_of(response: Any, status: int, code: str) -> dict[str, Any]:
    """The reply is the problem+json a client branches on: status, type, code, request id."""
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"].startswith(PROBLEM), response.headers
    body: dict[str, Any] = response.json()
    assert body["type"] == f"https://kernelindex.dev/problems/{code}", body
    assert body["status"] == status and body["code"] == code and body["detail"]
    assert body["requestId"] == response.headers["x-request-id"]
    return body


def event_count(ledger: Ledger) -> int:
    events = ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    with ledger.store.transaction(commit=False) as session:
        return int(session.execute(select(func.count()).select_from(events)).scalar_one())


def appended(served: Served) -> tuple[int, int]:
    """(tree size the API reports, events in the store): both must stay put on a refusal."""
    size = int(served.client.get("/health").json()["treeSize"])
    return size, event_count(served.ledger)


def register(
    served: Served, key: SigningKey, roles: list[Role], signer: SigningKey | None = None
) -> dict[str, Any]:
    # An agent key names the GPU it measures on (issue 32): the B200 of the tests' jobs.
    on = (DeviceClass("cuda", "NVIDIA B200", "sm_100"),) if Role.AGENT in roles else ()
    envelope = key_registration_envelope(
        key.public, roles, signer or key, label="abuse", devices=on
    )
    reply = served.client.post("/v1/keys", json=envelope)
    assert reply.status_code == 201, reply.text
    receipt: dict[str, Any] = reply.json()
    return receipt


def signed_bytes(payload: bytes, key: SigningKey) -> dict[str, Any]:
    """A DSSE envelope over arbitrary payload bytes, correctly signed by ``key``."""
    sig = key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [{"keyid": key.key_id, "sig": base64.b64encode(sig).decode()}],
    }
