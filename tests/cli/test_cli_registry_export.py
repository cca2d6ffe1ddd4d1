"""The registry anyone can mirror, and bundles named as ``show`` and ``leaderboard`` name
(issue 34 item 8): ``export --all`` (one signed bundle of the whole log, which ``verify``
accepts offline) and ``export --all --jsonl`` (a run a line, at one signed checkpoint whose
note lies beside it) write the bytes ``GET /v1/registry.bundle`` and ``GET
/v1/registry.jsonl`` send; ``export`` and ``GET /v1/bundle`` resolve a run's prefix or name
and a group's prefix by the service's one rule, and refuse an ambiguous one with its
candidates, leaving no file. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_session import Cli
from litestar import Litestar
from litestar.testing import TestClient
from served_app import TEST_CONFIG

from api.server.app import create_app
from api.service.built_files import BuiltFile
from ledger.home import LedgerHome
from tests.ledger.statement_count import statements_sent, writing

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
GROUP = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"


@pytest.fixture
def cli(tmp_path: Path, db_url: str, shared: Path) -> Cli:
    """The demo and an import: runs in several groups, and artifacts they name."""
    cli = Cli(tmp_path / "home", db_url)
    cli("demo", "--home", cli.home, "--db", db_url)
    cli("import", "sol-leaderboard", shared / "fixtures/sol-leaderboard")
    return cli


@pytest.fixture
def api(cli: Cli) -> Iterator[TestClient[Litestar]]:
    """The API in-process over the same ledger (opened after the CLI has written it)."""
    ledger = LedgerHome.at(cli.home, cli.db_url).open()
    try:
        with TestClient(create_app(ledger, TEST_CONFIG)) as client:
            yield client
    finally:
        ledger.close()


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


def _every_run(api: TestClient[Litestar]) -> list[str]:
    """Every run's digest, as the runs list pages them."""
    digests: list[str] = []
    cursor = ""
    while True:
        page = api.get(f"/v1/runs?limit=7{cursor}").json()
        digests += [item["digest"] for item in page["items"]]
        if page["next"] is None:
            return digests
        cursor = f"&cursor={page['next']}"


def _without_creation_time(bundle: bytes) -> list[Any]:
    """A bundle's lines, its header's ``createdAt`` (when it was written) left out."""
    lines = [json.loads(line) for line in bundle.decode("utf-8").splitlines()]
    assert lines[0]["type"] == "header"
    del lines[0]["createdAt"]
    return lines


def _verified(cli: Cli, bundle: Path) -> str:
    done = cli("verify", bundle, "--trust-root", cli.home / "trust-root.json")
    assert done.stdout.startswith("VERIFIED"), done.stdout
    return str(done.stdout)


def test_the_registry_as_one_bundle_verifies_and_is_what_the_api_sends(
    cli: Cli, api: TestClient[Litestar], out: Path
) -> None:
    bundle = out / "registry.bundle"
    done = cli("export", "--all", "-o", bundle)
    assert f"wrote {bundle}: " in done.stderr
    _verified(cli, bundle)
    lines = _without_creation_time(bundle.read_bytes())
    assert lines[0]["scope"] == {"all": True}
    assert lines[-1] == {"type": "footer", "events": cli.event_count()}

    sent = api.get("/v1/registry.bundle")
    assert sent.status_code == 200
    assert sent.headers["content-type"].startswith("application/x-ndjson")
    assert _without_creation_time(sent.content) == lines
    # What the API sent is a bundle verify accepts on its own.
    fetched = out / "fetched.bundle"
    fetched.write_bytes(sent.content)
    _verified(cli, fetched)


def test_the_registry_as_json_lines_is_a_run_a_line_at_one_signed_checkpoint(
    cli: Cli, api: TestClient[Litestar], out: Path
) -> None:
    registry = out / "registry.jsonl"
    done = cli("export", "--all", "--jsonl", "-o", registry)
    assert "runs at the signed checkpoint of" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["registry.jsonl", "registry.jsonl.checkpoint"]
    body = registry.read_bytes()
    lines = [json.loads(line) for line in body.decode("utf-8").splitlines()]
    runs = _every_run(api)
    assert len(lines) == len(runs) > 2
    assert [line["run"]["digest"] for line in lines] == runs  # ingestion order, each once
    listed = {item["digest"]: item for item in api.get("/v1/runs?limit=200").json()["items"]}
    assert all(line["run"] == listed[line["run"]["digest"]] for line in lines)

    note = (out / "registry.jsonl.checkpoint").read_text("utf-8")
    checkpoint = api.get("/v1/log/checkpoint").json()
    assert note == checkpoint["note"]  # nothing was written since: the current checkpoint
    assert {json.dumps(line["checkpoint"]) for line in lines} == {
        json.dumps({"size": checkpoint["size"], "rootHash": checkpoint["rootHash"]})
    }

    sent = api.get("/v1/registry.jsonl")
    assert sent.status_code == 200
    assert sent.headers["content-type"].startswith("application/x-ndjson")
    assert sent.content == body  # the same bytes from both faces
    assert base64.b64decode(sent.headers["kernelindex-checkpoint-note"]).decode() == note
    assert sent.headers["kernelindex-checkpoint-size"] == str(checkpoint["size"])
    assert sent.headers["kernelindex-checkpoint-root"] == checkpoint["rootHash"]


def test_a_run_or_group_is_exported_by_what_show_and_leaderboard_take(
    cli: Cli, api: TestClient[Litestar], out: Path
) -> None:
    names = {
        "prefix": ["--run", SEED[:15]],
        "name": ["--run", "sol-submission-38823"],
        "source id": ["--run", "38823"],
        "group prefix": ["--cohort", GROUP[:15]],
    }
    queries = {
        "prefix": f"run={SEED[:15]}",
        "name": "run=sol-submission-38823",
        "source id": "run=38823",
        "group prefix": f"cohort={GROUP[:15]}",
    }
    for what, argv in names.items():
        bundle = out / f"{what}.bundle"
        cli("export", *argv, "-o", bundle)
        _verified(cli, bundle)
        written = _without_creation_time(bundle.read_bytes())
        sent = api.get(f"/v1/bundle?{queries[what]}")
        assert sent.status_code == 200, (what, sent.text)
        assert _without_creation_time(sent.content) == written, what
        assert written[0]["scope"]["groups"] == [GROUP], what
        if what != "group prefix":
            assert SEED in written[0]["scope"]["runs"], what


def test_an_ambiguous_name_is_refused_with_its_candidates_and_leaves_no_file(
    cli: Cli, api: TestClient[Litestar], out: Path, seed_path: Path, tmp_path: Path
) -> None:
    # A second run carrying the source's id 38823 (a rerun under another name).
    manifests = json.loads(seed_path.read_text("utf-8"))
    manifests["run"]["metadata"]["name"] = "sol-submission-38823-rerun"
    manifests["run"]["spec"]["observedAt"] = "2026-08-23T00:00:00.000Z"
    rerun = tmp_path / "rerun.json"
    rerun.write_text(json.dumps(manifests), "utf-8")
    cli("ingest", rerun)
    api.app.state.service.views.position()  # the API's views see the new run

    refused = cli("export", "--run", "38823", "-o", out / "x.bundle", ok=False)
    assert refused.exit_code == 1 and "error[ambiguous-reference]" in refused.stderr
    message = " ".join(refused.stderr.split())
    for candidate in ("sol-submission-38823 ", "sol-submission-38823-rerun", SEED[:19]):
        assert candidate in message
    assert list(out.iterdir()) == []

    sent = api.get("/v1/bundle?run=38823")
    assert sent.status_code == 400
    problem = json.dumps(sent.json())
    assert "ambiguous-reference" in problem and "sol-submission-38823-rerun" in problem

    for query in ("cohort=sha256:ffff0000", "run=sha256:ffff0000"):
        assert api.get(f"/v1/bundle?{query}").status_code == 404, query


def test_the_registry_routes_write_nothing(api: TestClient[Litestar]) -> None:
    service = api.app.state.service
    service.views.position()  # what the CLI wrote is folded before the reads are counted
    with statements_sent(service.ledger.store.engine) as sent:
        for path in (
            "/v1/registry.jsonl",
            "/v1/registry.bundle",
            f"/v1/bundle?cohort={GROUP[:15]}",
        ):
            assert api.get(path).status_code == 200, path
    assert sent and writing(sent) == []


def test_the_registry_bundle_is_built_once_per_tree_size(
    cli: Cli, api: TestClient[Litestar], out: Path
) -> None:
    """Anyone may ask for it and it costs every event's proof: the server builds it once per
    tree size; a write makes the next request build the new one, which verifies."""
    kept = api.app.state.service.log._registry_bundle  # the serving process's one file
    first = api.get("/v1/registry.bundle").content
    again = api.get("/v1/registry.bundle").content
    assert again == first and kept.builds == 1
    key = cli.home / "keys" / "demo-attester.pem"
    cli("attest", "7e18c26c", "--type", "note", "--body", "a new event", "--key", key)
    newer = api.get("/v1/registry.bundle").content
    assert kept.builds == 2
    assert _without_creation_time(newer)[-1] == {"type": "footer", "events": cli.event_count()}
    fetched = out / "newer.bundle"
    fetched.write_bytes(newer)
    _verified(cli, fetched)


def test_while_a_newer_bundle_is_built_the_last_whole_one_is_sent() -> None:
    kept = BuiltFile("test-built-")
    first = b"".join(kept.pieces(1, lambda out: out.write("size one\n")))
    assert first == b"size one\n" and kept.builds == 1
    assert b"".join(kept.pieces(1, lambda out: out.write("never built\n"))) == first
    with kept._building:  # another request is building size 2 right now
        assert b"".join(kept.pieces(2, lambda out: out.write("not now\n"))) == first
    reading = kept.pieces(2, lambda out: out.write("size two\n"))
    # A reader of the last one keeps it whole though a newer one replaces it.
    newer = kept.pieces(3, lambda out: out.write("size three\n"))
    assert b"".join(reading) == b"size two\n" and b"".join(newer) == b"size three\n"
    assert kept.builds == 3
    kept.close()
