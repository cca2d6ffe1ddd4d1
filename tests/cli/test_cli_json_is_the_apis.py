"""``--json`` prints the API's JSON (issue 33): for one ledger, what ``show``, ``history``,
``leaderboard``, ``search`` (with filters, sort and pages), ``keys list`` (and ``compare``,
``log checkpoint``) print with ``--json`` is, byte for byte, the body the API sends for the
same query: same names, same types, lists as lists. The API is served in-process over the
same database. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pytest
from cli_session import Cli
from litestar.testing import TestClient
from served_app import TEST_CONFIG

from api.server.app import create_app
from ledger.home import LedgerHome

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
RUN_21613 = "sha256:7d1516c14ea952d53ea9d4646926919b9449e6029ea769059b6ce32c0ab9889b"
GROUP = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"


@pytest.fixture
def cli(tmp_path: Path, db_url: str, shared: Path) -> Cli:
    """The demo (the seed run, its group, an attestation, the demo's attester key), an
    import, a key registered by itself and two more attestations signed with it."""
    cli = Cli(tmp_path / "home", db_url)
    cli("demo", "--home", cli.home, "--db", db_url)
    cli("import", "sol-leaderboard", shared / "fixtures/sol-leaderboard")
    alice = tmp_path / "alice.pem"
    cli("keys", "generate", alice)
    cli("keys", "register", alice, "--role", "attester", "--self", "--label", "alice")
    for run, kind, body in (
        (SEED, "reproduced", "Reproduced on my B200: mean 1.74 ms"),
        (RUN_21613, "note", "Same kernel as 36818 with a larger tile"),
    ):
        cli("attest", run[:15], "--type", kind, "--body", body, "--key", alice)
    return cli


def test_json_of_each_read_command_is_the_apis_body_for_the_same_query(cli: Cli) -> None:
    keys_page = json.loads(cli("keys", "list", "--limit", "2", "--json").stdout)
    assert keys_page["next"] is not None  # the demo's four keys and alice's: pages follow
    queries: list[tuple[list[str], str]] = [
        (["show", SEED[:15]], f"/v1/runs/{SEED[:15]}"),
        (["show", "sol-submission-21613"], "/v1/runs/sol-submission-21613"),
        (["history", SEED], f"/v1/runs/{SEED}/history"),
        (
            ["history", SEED[:15], "--from", "2", "--limit", "1"],
            f"/v1/runs/{SEED[:15]}/history?start=2&limit=1",
        ),
        (["leaderboard", GROUP[:15]], f"/v1/leaderboards/{GROUP[:15]}"),
        (
            ["leaderboard", GROUP, "--view", "verified", "--min-level", "reported"],
            f"/v1/leaderboards/{GROUP}?view=verified&minLevel=reported",
        ),
        (
            ["leaderboard", GROUP, "--from", "2", "--limit", "1"],
            f"/v1/leaderboards/{GROUP}?start=2&limit=1",
        ),
        (["search", "B200", "v1.1"], f"/v1/search?q={quote('B200 v1.1')}"),
        (["search", "B200", "--per-page", "1"], "/v1/search?q=B200&perPage=1"),
        (
            [
                "search",
                "B200",
                "--gpu",
                "b200",
                "--source",
                "sol-execbench",
                "--page",
                "2",
                "--per-page",
                "1",
            ],
            "/v1/search?q=B200&gpu=b200&source=sol-execbench&page=2&perPage=1",
        ),
        (
            ["search", "--dtype", "bf16", "--level", "reported", "--sort", "newest"],
            "/v1/search?dtype=bf16&level=reported&sort=newest",
        ),
        (["keys", "list"], "/v1/keys/"),
        (["keys", "list", "--limit", "2"], "/v1/keys/?limit=2"),
        (["keys", "list", "--cursor", keys_page["next"]], f"/v1/keys/?cursor={keys_page['next']}"),
        (["compare", SEED[:15], RUN_21613[:15]], f"/v1/compare?a={SEED[:15]}&b={RUN_21613[:15]}"),
        (["log", "checkpoint"], "/v1/log/checkpoint"),
        (["gpus"], "/v1/gpus"),
        (["gpus", "NVIDIA B200", "--limit", "2"], f"/v1/gpus/{quote('NVIDIA B200')}?limit=2"),
        (["implementations"], "/v1/implementations"),
        (["implementations", "doubleAI"], "/v1/implementations/doubleAI"),
        (["records", "--limit", "1"], "/v1/records?limit=1"),
    ]
    day = datetime.now(UTC).date().isoformat()  # a citation's "accessed" is the day read
    printed = {path: cli(*argv, "--json").stdout_bytes for argv, path in queries}

    ledger = LedgerHome.at(cli.home, cli.db_url).open()
    try:
        with TestClient(create_app(ledger, TEST_CONFIG)) as client:
            for _, path in queries:
                sent = client.get(path)
                assert sent.status_code == 200, (path, sent.text)
                sent_bytes = sent.content + b"\n"
                today = datetime.now(UTC).date().isoformat()
                if today != day:  # midnight (UTC) fell between the CLI's read and the API's
                    sent_bytes = sent_bytes.replace(today.encode(), day.encode())
                assert printed[path] == sent_bytes, path
    finally:
        ledger.close()

    # What the bytes hold: the API's names and types (lists as lists), not the views' rows.
    board = json.loads(printed[f"/v1/leaderboards/{GROUP[:15]}"])
    assert board["comparisonKey"] == GROUP
    entries = board["entries"]
    assert [(e["run"], e["rank"], e["of"]) for e in entries][:1] == [(RUN_21613, 1, len(entries))]
    assert all(isinstance(e["tiedWith"], list) for e in entries)
    listed = json.loads(printed["/v1/keys/"])["items"]
    assert "alice" in [k["label"] for k in listed]
    assert all(isinstance(k["roles"], list) and isinstance(k["devices"], list) for k in listed)
    second = json.loads(printed["/v1/search?q=B200&gpu=b200&source=sol-execbench&page=2&perPage=1"])
    assert second["page"] == 2 and second["total"] >= 2 and len(second["items"]) == 1
    assert second["filters"] == {
        "gpu": "b200",
        "source": "sol-execbench",
        "dtype": None,
        "level": None,
        "license": None,
        "installable": None,
    }
    facets = {f["name"]: f["values"] for f in second["facets"]}
    assert [v["value"] for v in facets["gpu"] if v["selected"]] == ["NVIDIA B200"]
    shown = json.loads(printed[f"/v1/runs/{SEED[:15]}"])
    assert shown["digest"] == SEED and shown["attestationCount"] == 2
