"""Rate limits: what tests/server does not cover yet.

tests/server/test_api_writes.py shows the 429 + Retry-After problem for both limits and that
junk naming a key does not spend it. Here: a limited signer appends nothing and does not slow
anyone else; refused and replayed writes cost the signer nothing (only writes it really
signed and that were appended are charged); the limit lifts once its Retry-After has passed;
and one address being limited leaves other addresses unaffected, over real TCP. Minting keys
(self-registration) from one address is limited too, so it cannot multiply the per-key limit.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from abuse_support import (
    SEED,
    SEED_NAME,
    Served,
    appended,
    problem_of,
    register,
    serve,
    with_config,
)
from live_server import live_server

from api.server.app import create_app
from api.server.rate_limits import TokenBuckets
from domain.statements import Role
from ledger.home import LedgerHome
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.keys import SigningKey

ATTEST = f"/v1/runs/{SEED}/attestations"


class Clock:
    """A clock the test moves, so waiting out a Retry-After takes no time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def limited(db_url: str, tmp_path: Path) -> Iterator[tuple[Served, Clock]]:
    """Three writes per key, then one per 10 s; the key limiter on a test clock."""
    for served in serve(
        LedgerHome.at(tmp_path / "home", db_url), with_config(key_rate=0.1, key_burst=3)
    ):
        clock = Clock()
        served.app.state.key_limiter = TokenBuckets(0.1, 3, clock=clock)
        yield served, clock


def note(key: SigningKey, body: str) -> dict[str, object]:
    return attestation_envelope(SEED, SEED_NAME, key, type_="note", body=body)


def test_a_limited_signer_appends_nothing_and_others_are_unaffected(
    limited: tuple[Served, Clock],
) -> None:
    served, clock = limited
    c = served.client
    alice, bob = SigningKey.generate(), SigningKey.generate()
    register(served, alice, [Role.ATTESTER])  # self-signed: charged to Alice (1 of 3)
    register(served, bob, [Role.ATTESTER])
    good = note(alice, "0")
    assert c.post(ATTEST, json=good).status_code == 201
    # Replays and refused writes are free: they appended nothing Alice signed anew.
    for _ in range(5):
        assert c.post(ATTEST, json=good).status_code == 200
    forged = copy.deepcopy(note(alice, "forged"))
    forged["signatures"][0]["sig"] = note(bob, "x")["signatures"][0]["sig"]
    for _ in range(5):
        problem_of(c.post(ATTEST, json=forged), 403, "bad-signature")
    assert c.post(ATTEST, json=note(alice, "1")).status_code == 201  # 3 of 3
    before = appended(served)
    limited_reply = c.post(ATTEST, json=note(alice, "2"))
    body = problem_of(limited_reply, 429, "rate-limited")
    assert alice.key_id in body["detail"]
    retry_after = int(limited_reply.headers["retry-after"])
    assert 1 <= retry_after <= 10
    assert appended(served) == before
    # Bob, signing at the same moment, is not slowed by Alice's limit.
    assert c.post(ATTEST, json=note(bob, "bob")).status_code == 201
    # Once Retry-After has passed, Alice may write again (one token), then is limited again.
    clock.now += retry_after
    assert c.post(ATTEST, json=note(alice, "3")).status_code == 201
    problem_of(c.post(ATTEST, json=note(alice, "4")), 429, "rate-limited")


def test_an_address_over_its_limit_does_not_slow_other_addresses(tmp_path: Path) -> None:
    # The address limiter is in memory and never touches the store: SQLite only.
    config = with_config(address_rate=0.01, address_burst=5)
    for served in serve(LedgerHome.at(tmp_path / "home"), config):
        with live_server(create_app(served.ledger, config)) as server:
            noisy = httpx.Client(
                base_url=server.url, transport=httpx.HTTPTransport(local_address="127.0.0.2")
            )
            quiet = httpx.Client(
                base_url=server.url, transport=httpx.HTTPTransport(local_address="127.0.0.3")
            )
            with noisy, quiet:
                statuses = [noisy.get("/health").status_code for _ in range(8)]
                assert statuses[:5] == [200] * 5 and statuses[5:] == [429] * 3, statuses
                refused = noisy.get(f"/v1/runs/{SEED}")
                problem_of(refused, 429, "rate-limited")
                assert "127.0.0.2" in refused.json()["detail"]
                assert int(refused.headers["retry-after"]) >= 1
                # Writes from the noisy address are refused before they are even parsed.
                problem_of(noisy.post(ATTEST, content=b"{"), 429, "rate-limited")
                assert [quiet.get("/health").status_code for _ in range(5)] == [200] * 5


def test_minting_keys_from_one_address_hits_429_and_each_key_stays_limited(
    tmp_path: Path,
) -> None:
    """Anyone may register an attester key for itself, so the per-key write limit alone
    multiplies by the keys a client mints: one address may mint only a few."""
    config = with_config(
        key_rate=0.1, key_burst=3, address_rate=1000, registration_rate=0.001, registration_burst=3
    )
    for served in serve(LedgerHome.at(tmp_path / "home"), config):
        c = served.client
        minted = [SigningKey.generate() for _ in range(3)]
        for key in minted:
            register(served, key, [Role.ATTESTER])
        extra = SigningKey.generate()
        before = appended(served)
        refused = c.post(  # the same route with a trailing slash is no way around it
            "/v1/keys/", json=key_registration_envelope(extra.public, [Role.ATTESTER], extra)
        )
        body = problem_of(refused, 429, "rate-limited")
        assert "registered from" in body["detail"]
        assert int(refused.headers["retry-after"]) >= 1
        assert appended(served) == before
        problem_of(c.get(f"/v1/keys/{extra.key_id}"), 404, "not-found")
        # A key registered by the admin is no mint: the same address may still send it.
        admin = served.home.key("admin")
        register(served, extra, [Role.ATTESTER], signer=admin)
        # And every minted key is still limited on its own: its registration and two notes.
        alice = minted[0]
        assert c.post(ATTEST, json=note(alice, "0")).status_code == 201
        assert c.post(ATTEST, json=note(alice, "1")).status_code == 201
        limited = problem_of(c.post(ATTEST, json=note(alice, "2")), 429, "rate-limited")
        assert alice.key_id in limited["detail"]
