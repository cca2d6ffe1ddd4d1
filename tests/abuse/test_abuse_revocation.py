"""Key revocation takes effect on the very next request: in one server, and across two
servers (two Ledger objects, as two processes would hold) on the same database.

SQLite and PostgreSQL both: a revocation written through one server is enforced by the other
on its next request, with no restart and no cache to expire.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from abuse_support import (
    SEED,
    SEED_NAME,
    TEST_CONFIG,
    Served,
    appended,
    problem_of,
    register,
)
from litestar import Litestar
from litestar.testing import TestClient

from api.server.app import create_app
from domain.statements import Role
from ledger.home import LedgerHome
from ledger.signing.authoring import (
    attestation_envelope,
    key_registration_envelope,
    key_revocation_envelope,
)
from ledger.signing.keys import SigningKey

ATTEST = f"/v1/runs/{SEED}/attestations"


def note(key: SigningKey, body: str) -> dict[str, object]:
    return attestation_envelope(SEED, SEED_NAME, key, type_="note", body=body)


def test_a_self_revoked_key_is_refused_on_the_next_request(served: Served) -> None:
    c = served.client
    alice = SigningKey.generate()
    register(served, alice, [Role.ATTESTER])
    signed_before = note(alice, "signed before the revocation, sent after")
    assert c.post(ATTEST, json=note(alice, "while valid")).status_code == 201
    accepted = note(alice, "accepted before the revocation")
    assert c.post(ATTEST, json=accepted).status_code == 201
    revoke = key_revocation_envelope(alice.public, alice, reason="laptop lost")
    assert c.post(f"/v1/keys/{alice.key_id}/revocations", json=revoke).status_code == 201
    before = appended(served)
    problem_of(c.post(ATTEST, json=note(alice, "after")), 403, "revoked-key")
    problem_of(c.post(ATTEST, json=signed_before), 403, "revoked-key")
    # A revoked key cannot register a fresh key for itself, nor revoke anyone else.
    fresh = SigningKey.generate()
    by_revoked = key_registration_envelope(fresh.public, [Role.ATTESTER], alice)
    assert c.post("/v1/keys", json=by_revoked).status_code in (403, 422)
    # What it signed while valid stays on the record: a replay is the old event, not new.
    replay = c.post(ATTEST, json=accepted)
    assert replay.status_code in (200, 403), replay.text
    assert appended(served) == before
    assert c.get(f"/v1/keys/{alice.key_id}").json()["status"] == "revoked"


def test_an_admin_revocation_is_enforced_on_the_next_request(served: Served) -> None:
    c = served.client
    agent = SigningKey.generate()
    admin = served.home.key("admin")
    register(served, agent, [Role.ATTESTER], signer=admin)
    assert c.post(ATTEST, json=note(agent, "ok")).status_code == 201
    revoke = key_revocation_envelope(agent.public, admin, reason="compromised")
    assert c.post(f"/v1/keys/{agent.key_id}/revocations", json=revoke).status_code == 201
    before = appended(served)
    problem_of(c.post(ATTEST, json=note(agent, "next")), 403, "revoked-key")
    assert appended(served) == before


@pytest.fixture
def two_servers(db_url: str, tmp_path: Path) -> Iterator[tuple[Served, TestClient[Litestar]]]:
    """The demo ledger behind one server, and a second server over the same database."""
    from abuse_support import serve

    for first in serve(LedgerHome.at(tmp_path / "home", db_url)):
        other = create_app(first.home.open(), TEST_CONFIG)
        with TestClient(other) as second:
            yield first, second


def test_a_revocation_through_one_server_is_enforced_by_the_other(
    two_servers: tuple[Served, TestClient[Litestar]],
) -> None:
    first, second = two_servers
    alice = SigningKey.generate()
    register(first, alice, [Role.ATTESTER])
    # The second server has seen (and so may have loaded) Alice's key before the revocation.
    assert second.post(ATTEST, json=note(alice, "via the second")).status_code == 201
    assert second.get(f"/v1/keys/{alice.key_id}").json()["status"] == "active"
    revoke = key_revocation_envelope(alice.public, first.home.key("admin"), reason="left")
    reply = first.client.post(f"/v1/keys/{alice.key_id}/revocations", json=revoke)
    assert reply.status_code == 201, reply.text
    before = appended(first)
    problem_of(second.post(ATTEST, json=note(alice, "too late")), 403, "revoked-key")
    problem_of(first.client.post(ATTEST, json=note(alice, "too late")), 403, "revoked-key")
    assert appended(first) == before
    assert int(second.get("/health").json()["treeSize"]) == before[0]
