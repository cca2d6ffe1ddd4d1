"""Attacks on a server's write path from an HTTP client, on SQLite and PostgreSQL: the key id
an envelope names is the client's word until its signature verifies, and may be as long as
the 2 MiB body allows. What held is asserted as it is; what did not is asserted as it should
be and marked ``xfail(strict=True)`` with its severity, for the lead to fix."""

from __future__ import annotations

import base64
import gc
import json
import tracemalloc
from typing import Any

from served_app import Served
from test_api_reads import problem_of

from api.server.rate_limits import TokenBuckets
from ledger.signing.authoring import attestation_envelope
from ledger.signing.keys import SigningKey


def note_naming(served: Served, keyid: str) -> dict[str, Any]:
    """A note on the seed run, signed by the demo attester, its one signature naming
    ``keyid`` instead."""
    run = served.ledger.run(served.seed)
    assert run is not None
    attester = SigningKey.load(served.home.path / "keys" / "demo-attester.pem")
    raw = attestation_envelope(served.seed, run.run_name, attester, type_="note", body="n")
    raw["signatures"][0]["keyid"] = keyid
    return raw


def posted(served: Served, raw: dict[str, Any]) -> Any:
    return served.client.post(
        f"/v1/runs/{served.seed}/attestations",
        content=json.dumps(raw).encode(),
        headers={"content-type": "application/json"},
    )


def test_a_junk_signature_naming_a_registered_key_is_refused_and_nothing_stored(
    served: Served,
) -> None:
    """Held: through the worker's checks and the writer's verdict, 403 bad-signature."""
    attester = SigningKey.load(served.home.path / "keys" / "demo-attester.pem")
    size = served.client.get("/health").json()["treeSize"]
    raw = note_naming(served, attester.key_id)
    junk = SigningKey.generate().sign(b"something else")
    raw["signatures"][0]["sig"] = base64.b64encode(junk).decode()
    problem_of(posted(served, raw), 403, "bad-signature")
    assert served.client.get("/health").json()["treeSize"] == size


def test_an_unknown_key_refusal_does_not_echo_a_huge_made_up_key_id(served: Served) -> None:
    response = posted(served, note_naming(served, "sha256:" + "a" * 100_000))
    body = problem_of(response, 403, "unknown-key")
    assert len(body["detail"]) < 1_000, f"a {len(body['detail'])}-character detail"


def test_the_key_rate_limit_holds_no_memory_for_made_up_key_ids() -> None:
    limiter = TokenBuckets(20.0, 40)  # the server's default key rate
    gc.collect()
    tracemalloc.start()
    try:
        for n in range(24):
            # What api.server.controllers.common.admit asks for an envelope naming it.
            assert limiter.take(f"sha256:{n:04d}" + "a" * (1 << 20), spend=False) is None
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 4 << 20, f"{held >> 20} MiB kept for 24 made-up key ids"
