"""The CLI against a real server: `serve`, and `attest`/`history` with --server.

A uvicorn server runs in a background thread on a free loopback port, serving the demo ledger
(on each backend); the CLI talks to it over HTTP exactly as it would to a remote one. A
history is verified here against the trust root the user pins: a server that alters, drops
or forges anything, or shows another log than before, is caught.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_session import Cli
from live_server import free_port, live_server, wait_for_health
from typer.testing import CliRunner

import api.cli.remote
from api.cli.main import app
from api.client import LedgerClient
from api.demo import build_demo
from api.server.app import create_app
from api.server.config import ServerConfig
from domain.statements import Role
from ledger.home import LedgerHome

SEED_RUN = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
NAME = "sol-submission-38823"
REPO = Path(__file__).resolve().parents[2]
# Rate limits off: these tests measure behaviour, not throttling.
TEST_CONFIG = ServerConfig(key_rate=0, address_rate=0, json_logs=False)


class Remote(Cli):
    """The CLI, plus the URL of the server it is pointed at."""

    def __init__(self, url: str, home: Path, db_url: str) -> None:
        super().__init__(home, db_url)
        self.url = url

    @property
    def root(self) -> Path:
        """The served ledger's trust root, as its operator publishes it."""
        return self.home / "trust-root.json"

    def history(self, run: str, *extra: object, ok: bool = True) -> Any:
        return self("history", run, "--server", self.url, "--trust-root", self.root, *extra, ok=ok)

    def attester(self, path: Path) -> str:
        """A new attester key, self-registered in the served ledger; its key id."""
        key_id = str(self.json("keys", "generate", path)["keyId"])
        self("keys", "register", path, "--role", "attester", "--self", "--label", path.stem)
        return key_id


@pytest.fixture
def remote(tmp_path: Path, db_url: str) -> Iterator[Remote]:
    """The demo ledger behind a real HTTP server, per backend."""
    home = LedgerHome.at(tmp_path / "home", db_url)
    ledger, seed = build_demo(home)
    assert seed == SEED_RUN
    with live_server(create_app(ledger, TEST_CONFIG)) as server:
        yield Remote(server.url, home.path, db_url)


def attest_args(remote: Remote, key: Path, *extra: str) -> list[object]:
    return [
        "attest",
        SEED_RUN[:14],
        "--server",
        remote.url,
        "--type",
        "reproduced",
        "--body",
        "Reproduced on my B200: mean 1.74 ms",
        "--key",
        key,
        *extra,
    ]


# -------------------------------------------------------- attest, history


def test_attest_through_the_server_then_history_shows_it_verified(
    remote: Remote, tmp_path: Path
) -> None:
    alice = tmp_path / "alice.pem"
    key_id = remote.attester(alice)
    receipt = remote.json(*attest_args(remote, alice, "--observed-ns", "1740000"))
    assert receipt["event"] == "Run.Attested" and receipt["duplicate"] is False
    assert receipt["subjectDigest"] == SEED_RUN
    assert receipt["log"]["leafIndex"] >= 0 and receipt["log"]["treeSize"] > 0

    text = remote(*attest_args(remote, alice, "--environment", "my lab")).stdout
    assert text.startswith("attestation appended: Run.Attested at position ")
    assert "(leaf " in text

    history = json.loads(remote.history(SEED_RUN[7:19], "--json").stdout)
    assert history["run"] == SEED_RUN and history["outcome"] == "VERIFIED"
    events = history["events"]
    assert [(e["event"], e["role"], e["verified"]) for e in events] == [
        ("Run.Ingested", "ingester", True),
        ("Run.Attested", "attester", True),  # the demo's own attestation
        ("Run.Attested", "attester", True),
        ("Run.Attested", "attester", True),
    ]
    ours = events[2]
    assert ours["signer"] == key_id
    assert ours["predicate"]["observedNs"] == 1740000
    assert ours["says"].startswith("reproduced: Reproduced on my B200")
    assert ours["envelopeDigest"].startswith("sha256:") and isinstance(ours["leafIndex"], int)
    assert {c["name"] for c in ours["checks"]} >= {"signature", "role", "key-valid", "inclusion"}

    shown = remote.history(SEED_RUN).stdout
    assert shown.startswith(f"History of {SEED_RUN}")
    assert shown.count("✓ verified") == 4 and "FAILED" not in shown
    assert f"signer {key_id} (attester)" in shown


def test_the_same_attestation_again_is_already_recorded(
    remote: Remote, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = tmp_path / "alice.pem"
    remote.attester(alice)
    # Ed25519 signatures are deterministic: with issuedAt fixed (after the key's registration),
    # the envelope is identical.
    fixed = datetime.now(UTC)
    monkeypatch.setattr("ledger.signing.authoring.utc_now", lambda: fixed)
    first = remote.json(*attest_args(remote, alice))
    again = remote(*attest_args(remote, alice)).stdout
    assert again.startswith("attestation already recorded: Run.Attested at position")
    second = remote.json(*attest_args(remote, alice))
    assert second["duplicate"] is True
    assert (second["position"], second["envelopeDigest"]) == (
        first["position"],
        first["envelopeDigest"],
    )
    events = json.loads(remote.history(SEED_RUN, "--json").stdout)["events"]
    assert len(events) == 3


def test_an_unregistered_key_is_refused_by_the_server(remote: Remote, tmp_path: Path) -> None:
    mallory = tmp_path / "mallory.pem"
    remote("keys", "generate", mallory)
    result = remote(*attest_args(remote, mallory), ok=False)
    assert result.exit_code == 1
    assert "error[unknown-key]" in result.stderr
    assert len(json.loads(remote.history(SEED_RUN, "--json").stdout)["events"]) == 2


def test_history_of_an_unknown_run_is_not_found(remote: Remote) -> None:
    result = remote.history("sha256:" + "ab" * 32, ok=False)
    assert result.exit_code == 1 and "error[not-found]" in result.stderr
    result = remote.history("zz", ok=False)  # a name no run has (and too short a prefix)
    assert result.exit_code == 1 and "error[not-found]" in result.stderr
    assert "(a prefix needs 4+ hex)" in result.stderr


def test_server_and_local_ledger_are_alternatives(remote: Remote, tmp_path: Path) -> None:
    result = remote("history", SEED_RUN, "--server", remote.url, "--home", tmp_path, ok=False)
    assert result.exit_code == 2 and "--server" in result.output
    result = remote("history", SEED_RUN, "--server", "127.0.0.1:8000", ok=False)
    assert result.exit_code == 1 and "error[malformed-request]" in result.stderr


# ------------------------------------------------------- server failures


def test_a_server_that_is_down_is_unreachable(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    runner = CliRunner()
    key = tmp_path / "k.pem"
    assert runner.invoke(app, ["keys", "generate", str(key)]).exit_code == 0
    for args in (
        ["history", SEED_RUN, "--server", url],
        ["attest", SEED_RUN, "--server", url, "--type", "note", "--body", "x", "--key", str(key)],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output
        assert "error[unreachable]" in result.stderr and url in result.stderr


@pytest.fixture
def served_sqlite(tmp_path: Path) -> Iterator[Remote]:
    home = LedgerHome.at(tmp_path / "home")
    ledger, _ = build_demo(home)
    with live_server(create_app(ledger, TEST_CONFIG)) as server:
        yield Remote(server.url, home.path, home.db_url)


Tamper = Callable[[list[dict[str, Any]]], None]


@contextmanager
def lying(remote: Remote, monkeypatch: pytest.MonkeyPatch, on_bundle: Tamper) -> Iterator[None]:
    """Make the CLI talk to a proxy that forwards to ``remote`` and alters its bundles."""
    upstream = httpx.Client(base_url=remote.url)

    def forward(request: httpx.Request) -> httpx.Response:
        reply = upstream.request(
            request.method,
            request.url.raw_path.decode(),
            content=request.content,
            headers={"Content-Type": request.headers.get("content-type", "application/json")},
        )
        if reply.is_success and request.url.path == "/v1/bundle":
            records = [json.loads(line) for line in reply.text.splitlines()]
            on_bundle(records)
            text = "".join(json.dumps(r) + "\n" for r in records)
            return httpx.Response(reply.status_code, text=text)
        content_type = reply.headers.get("content-type", "application/json")
        return httpx.Response(
            reply.status_code, content=reply.content, headers={"content-type": content_type}
        )

    transport = httpx.MockTransport(forward)

    def client(base_url: str, timeout: float = 30.0) -> LedgerClient:
        return LedgerClient(base_url, timeout, transport=transport)

    monkeypatch.setattr(api.cli.remote, "LedgerClient", client)
    try:
        yield
    finally:
        upstream.close()


def _run_events(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == "event" and "Run." in r["topic"]]


def flip_first_signature(records: list[dict[str, Any]]) -> None:
    envelope = _run_events(records)[0]["envelope"]
    sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    sig[0] ^= 0xFF
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()


def test_history_from_a_lying_server_shows_the_event_failed(
    served_sqlite: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = served_sqlite
    with lying(remote, monkeypatch, flip_first_signature):
        result = remote.history(SEED_RUN, ok=False)
        assert result.exit_code == 1
        first, second = result.stdout.split("\n#")[1:3]
        assert "Run.Ingested  ✗ FAILED" in first and "signature:" in first
        assert "inclusion: not in the checkpoint's tree" in first
        assert "✓ verified" in second
        assert "FAILED" in result.stdout.split("\n\n")[-1]
        events = json.loads(remote.history(SEED_RUN, "--json", ok=False).stdout)["events"]
    assert [e["verified"] for e in events] == [False, True]
    failed = {c["name"] for c in events[0]["checks"] if not c["ok"]}
    assert failed == {"signature", "inclusion"}


def test_history_where_the_server_drops_an_event_fails(
    served_sqlite: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's attestation left out (footer fixed up): the log's heads give it away."""

    def drop(records: list[dict[str, Any]]) -> None:
        records.remove(_run_events(records)[-1])
        records[-1]["events"] -= 1

    remote = served_sqlite
    with lying(remote, monkeypatch, drop):
        result = remote.history(SEED_RUN, ok=False)
    assert result.exit_code == 1
    assert "complete at run" in result.stdout and "is left out" in result.stdout


def test_history_where_the_server_swaps_the_signed_content_fails(
    served_sqlite: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reword(records: list[dict[str, Any]]) -> None:
        envelope = _run_events(records)[1]["envelope"]
        statement = json.loads(base64.b64decode(envelope["payload"]))
        statement["predicate"]["body"] = "This run is fake."
        envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()

    remote = served_sqlite
    with lying(remote, monkeypatch, reword):
        result = remote.history(SEED_RUN, ok=False)
    assert result.exit_code == 1
    assert "Run.Attested  ✗ FAILED" in result.stdout and "signature:" in result.stdout


def test_history_where_the_server_forges_its_key_book_fails(
    served_sqlite: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server swaps the attester's registration for a key of its own making (signed by
    that key, as a self-registration): the swap breaks the event's leaf, and the attester's
    signature then names a key the pinned root never let in."""
    from ledger.signing.authoring import key_registration_envelope
    from ledger.signing.keys import SigningKey

    forger = SigningKey.generate()

    def forge(records: list[dict[str, Any]]) -> None:
        attester = _run_events(records)[1]["envelope"]["signatures"][0]["keyid"]
        for record in records:
            if record["type"] == "event" and "Principal.Registered" in record["topic"]:
                payload = json.loads(base64.b64decode(record["envelope"]["payload"]))
                if payload["predicate"]["keyId"] == attester:
                    record["envelope"] = key_registration_envelope(
                        forger.public, [Role.ATTESTER], forger
                    )

    remote = served_sqlite
    with lying(remote, monkeypatch, forge):
        result = remote.history(SEED_RUN, ok=False)
    assert result.exit_code == 1
    assert "inclusion" in result.stdout and "FAILED" in result.stdout


def test_history_without_a_pinned_root_is_unanchored(served_sqlite: Remote) -> None:
    remote = served_sqlite
    result = remote("history", SEED_RUN, "--server", remote.url, ok=False)
    assert result.exit_code == 4 and "UNANCHORED" in result.stdout
    result = remote("history", SEED_RUN, "--server", remote.url, "--unsafe-trust-bundle-root")
    assert "UNSAFE" in result.stdout


def test_history_answered_with_another_run_is_refused(
    served_sqlite: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    def other_run(records: list[dict[str, Any]]) -> None:
        records[0]["scope"]["runs"] = ["sha256:" + "cd" * 32]

    remote = served_sqlite
    with lying(remote, monkeypatch, other_run):
        result = remote.history(SEED_RUN[:12], ok=False)
    assert result.exit_code == 1 and "error[bad-reply]" in result.stderr


def test_a_server_showing_another_log_than_before_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A split view: the operator's keys sign two logs, one per audience, forked after a
    common prefix. The checkpoint the user holds (kept up to date by --checkpoint) makes the
    other log fail: it does not extend the checkpoint the first one showed."""
    import shutil

    from ledger.signing.authoring import attestation_envelope, key_registration_envelope
    from ledger.signing.keys import SigningKey

    def note(ledger: Any, body: str) -> None:
        key = SigningKey.generate()
        ledger.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
        ledger.append(attestation_envelope(SEED_RUN, NAME, key, type_="note", body=body))

    home = LedgerHome.at(tmp_path / "home")
    build_demo(home)[0].close()
    shutil.copytree(home.path, tmp_path / "fork")  # the common prefix, the same keys
    fork = LedgerHome.at(tmp_path / "fork")
    honest, forked = home.open(), fork.open()
    note(honest, "what one audience sees")
    note(forked, "what the other sees")
    note(forked, "and more")
    held = tmp_path / "held.note"
    with live_server(create_app(honest, TEST_CONFIG)) as server:
        Remote(server.url, home.path, home.db_url).history(SEED_RUN, "--checkpoint", held)
    size = int(held.read_text().split("\n")[1])
    with live_server(create_app(forked, TEST_CONFIG)) as server:
        liar = Remote(server.url, home.path, home.db_url)
        result = liar.history(SEED_RUN, "--checkpoint", held, ok=False)
    assert result.exit_code == 1
    assert "does not extend the one you hold" in result.stdout
    assert int(held.read_text().split("\n")[1]) == size  # a failed answer updates nothing


# ----------------------------------------------------------------- serve


def test_serve_demo_answers_http(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELINDEX_")}
    stdout, stderr = tmp_path / "serve.out", tmp_path / "serve.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "api.cli",
                "serve",
                "--demo",
                "--home",
                str(tmp_path / "demo"),
                "--port",
                str(port),
                "--log-format",
                "console",
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=err,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(base, process, stderr, timeout=60)
        record = httpx.get(f"{base}/v1/runs/7e18c26c", timeout=10)
        assert record.status_code == 200
        assert record.json()["digest"] == SEED_RUN and "rank" in record.text
        assert f"listening on {base}" in stdout.read_text()
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_history_answered_with_another_runs_genuine_bundle_fails(
    served_sqlite: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mirror with no keys answers a history request with another run's genuine bundle,
    its header edited to name the run asked for: the heads do not cover that run."""
    remote = served_sqlite
    upstream = httpx.get(f"{remote.url}/v1/runs", params={"limit": 50}).json()["items"]
    other = next(r["digest"] for r in upstream if r["digest"] != SEED_RUN)
    genuine = httpx.get(f"{remote.url}/v1/bundle", params={"run": other, "group": "false"}).text

    def swap(records: list[dict[str, Any]]) -> None:
        records[:] = [json.loads(line) for line in genuine.splitlines()]
        records[0]["scope"]["runs"] = [SEED_RUN]

    with lying(remote, monkeypatch, swap):
        result = remote.history(SEED_RUN, ok=False)
    assert result.exit_code == 1
    assert "FAILED" in result.stdout and "expectation" in result.stdout


def test_a_key_is_registered_on_a_server_as_the_run_page_says_then_it_reports(
    remote: Remote, tmp_path: Path
) -> None:
    """The run page's 'Take part' commands, as written: register over HTTP, then report."""
    me = tmp_path / "me.pem"
    key_id = remote.json("keys", "generate", me)["keyId"]
    registered = remote.json(
        "keys", "register", me, "--role", "attester", "--self", "--server", remote.url
    )
    assert registered["event"] == "Principal.Registered" and registered["subjectDigest"] == key_id
    reported = remote.json(
        "attest",
        SEED_RUN,
        "--type",
        "issue_report",
        "--reason",
        "wrong_attribution",
        "--body",
        "the kernel is by someone else",
        "--key",
        me,
        "--server",
        remote.url,
    )
    assert reported["event"] == "Run.Attested"
    page = httpx.get(f"{remote.url}/runs/{SEED_RUN}").text
    assert "Reported issues" in page and "wrong attribution" in page
    # Registering an admin-signed role over HTTP needs an admin key given explicitly.
    refused = remote("keys", "register", me, "--role", "agent", "--server", remote.url, ok=False)
    assert refused.exit_code == 2 and "--admin-key" in refused.output


# -------------------------------------------------------- runs by name, through a server


def test_history_by_name_or_source_id_is_checked_against_the_signed_ingestion(
    served_sqlite: Remote,
) -> None:
    remote = served_sqlite
    for reference in (NAME, "38823", "sol-execbench#38823"):
        history = json.loads(remote.history(reference, "--json").stdout)
        assert history["run"] == SEED_RUN and history["outcome"] == "VERIFIED", reference


def test_history_by_a_name_the_run_does_not_have_is_refused(
    served_sqlite: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server answering a name with a run whose signed ingestion does not carry it."""
    remote = served_sqlite
    asked: list[str] = []

    def any_run(records: list[dict[str, Any]]) -> None:
        asked.append(records[0]["scope"]["runs"][0])

    real_bundle = LedgerClient.run_bundle

    def seed_for_every_name(self: LedgerClient, reference: str, held: list[int]) -> list[str]:
        return real_bundle(self, SEED_RUN, held)  # whatever was asked: the seed's bundle

    monkeypatch.setattr(LedgerClient, "run_bundle", seed_for_every_name)
    with lying(remote, monkeypatch, any_run):
        result = remote.history("sol-submission-99999", ok=False)
    assert asked == [SEED_RUN]
    assert result.exit_code == 1 and "error[bad-reply]" in result.stderr
    assert "asked for run sol-submission-99999" in result.stderr


def test_attest_by_name_through_a_server_asks_for_the_digest(
    served_sqlite: Remote, tmp_path: Path
) -> None:
    """A write must name what it signs: a name would be only the server's word."""
    remote = served_sqlite
    alice = tmp_path / "alice.pem"
    remote.attester(alice)
    args = attest_args(remote, alice)
    args[1] = NAME
    result = remote(*args, ok=False)
    assert "error[unchecked-name]" in result.stderr and SEED_RUN in result.stderr
    assert f"kernelindex history {NAME} --server" in result.stderr
