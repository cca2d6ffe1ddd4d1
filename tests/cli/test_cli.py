"""The ``kernelindex`` CLI as a user drives it: outputs, exit codes and what ends up stored."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_session import Cli, alter_stored_signature
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from api.cli.main import app

SEED_DIGESTS = {
    "run": "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47",
    "protocol": "sha256:6383f62490dad270ad2146a94f67b48fba5cfcbc0b9b180f02665c69cc4433a0",
    "environment": "sha256:f304afb2fedab4bbeadf8ac36a990ff517ab6e824dfe5a3ee0fe46259ff5e39f",
}
SEED_RUN = SEED_DIGESTS["run"]


@pytest.fixture
def cli(tmp_path: Path, db_url: str) -> Cli:
    return Cli(tmp_path / "home", db_url)


@pytest.fixture
def ledger_with_seed(cli: Cli, seed_path: Path) -> Cli:
    cli("init")
    cli("ingest", seed_path)
    return cli


def write(path: Path, content: Any) -> Path:
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


# ---------------------------------------------------------------- digest


def test_digest_of_the_seed_prints_the_three_pinned_digests(seed_path: Path) -> None:
    result = CliRunner().invoke(app, ["digest", str(seed_path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 3
    for line, (role, digest) in zip(lines, SEED_DIGESTS.items(), strict=True):
        assert line.split()[0] == role and line.split()[-1] == digest
    rows = json.loads(CliRunner().invoke(app, ["digest", "--json", str(seed_path)]).stdout)
    assert {r["role"]: r["digest"] for r in rows} == SEED_DIGESTS
    assert [r["kind"] for r in rows] == [
        "BenchmarkRun",
        "BenchmarkProtocol",
        "ExecutionEnvironment",
    ]


def test_digest_of_single_manifest_list_and_yaml(tmp_path: Path, seed_path: Path) -> None:
    seed = json.loads(seed_path.read_text())
    single = write(tmp_path / "protocol.json", seed["protocol"])
    listed = write(tmp_path / "list.json", [seed["environment"], seed["run"]])
    from ruamel.yaml import YAML

    yaml_path = tmp_path / "run.yaml"
    with yaml_path.open("w") as handle:
        YAML().dump(seed["run"], handle)
    result = CliRunner().invoke(app, ["digest", "--json", str(single), str(listed), str(yaml_path)])
    assert result.exit_code == 0, result.output
    assert [r["digest"] for r in json.loads(result.stdout)] == [
        SEED_DIGESTS["protocol"],
        SEED_DIGESTS["environment"],
        SEED_DIGESTS["run"],
        SEED_DIGESTS["run"],
    ]


@pytest.mark.parametrize(
    ("content", "code", "words"),
    [
        ("unknown-field", "schema-violation", "unknown field"),
        ("kind: BenchmarkProtocol\nkind: BenchmarkRun\n", "malformed-document", "duplicate key"),
        ("oversized", "too-large", "1 MiB"),
        ("{not json", "malformed-document", "malformed JSON"),
    ],
)
def test_digest_rejects_bad_documents(
    tmp_path: Path, seed_path: Path, content: str, code: str, words: str
) -> None:
    seed = json.loads(seed_path.read_text())
    if content == "unknown-field":
        seed["protocol"]["spec"]["harness"]["flavour"] = "x"
        path = write(tmp_path / "m.json", seed["protocol"])
    elif content == "oversized":
        path = write(tmp_path / "m.json", seed["protocol"] | {"pad": "x" * (1024 * 1024)})
    else:
        path = write(tmp_path / ("m.yaml" if "kind:" in content else "m.json"), content)
    result = CliRunner().invoke(app, ["digest", str(path)])
    assert result.exit_code == 1
    assert f"error[{code}]" in result.output and words in result.output


# ------------------------------------------------------------ round trip


def test_round_trip_init_ingest_attest_history(ledger_with_seed: Cli, tmp_path: Path) -> None:
    cli = ledger_with_seed
    alice = tmp_path / "alice.pem"
    key = cli.json("keys", "generate", alice)
    assert oct(alice.stat().st_mode & 0o777) == "0o600"
    cli("keys", "register", alice, "--role", "attester", "--self", "--label", "alice")
    receipt = cli.json(
        "attest",
        SEED_RUN[:15],
        "--type",
        "reproduced",
        "--body",
        "Reproduced on my B200: mean 1.74 ms",
        "--key",
        alice,
        "--evidence-url",
        "https://example.org/log.txt",
        "--observed-ns",
        "1740000",
    )
    assert receipt["event"] == "Run.Attested" and not receipt["duplicate"]

    history = cli.json("history", SEED_RUN)
    events = history["events"]
    assert [(e["event"], e["role"], e["verified"]) for e in events] == [
        ("Run.Ingested", "ingester", True),
        ("Run.Attested", "attester", True),
    ]
    assert events[1]["signer"] == key["keyId"]
    assert events[1]["predicate"]["type"] == "reproduced"
    text_out = cli("history", SEED_RUN[:12]).stdout
    assert text_out.count("verified") == 2 and "FAILED" not in text_out

    shown = cli.json("show", SEED_RUN)
    assert shown["name"] == "sol-submission-38823"
    assert shown["primary"] == {
        "metric": "latency",
        "statistic": "mean",
        "unit": "ns",
        "value": 1750693,
        "latencyNs": 1750693,
    }
    assert shown["protocol"]["digest"] == SEED_DIGESTS["protocol"]
    assert len(shown["attestations"]) == 1 and shown["attestationCount"] == 1
    assert shown["shownEventsVerified"]
    assert "sol-submission-38823" in cli("show", SEED_RUN[7:17]).stdout

    keys = cli.json("keys", "list")["items"]
    assert {tuple(k["roles"]) for k in keys} == {("admin",), ("ingester",), ("log",), ("attester",)}


def test_ingest_twice_reports_the_existing_record(ledger_with_seed: Cli, seed_path: Path) -> None:
    before = ledger_with_seed.event_count()
    result = ledger_with_seed("ingest", seed_path, ok=False)
    assert "error[already-exists]" in result.output
    assert ledger_with_seed.event_count() == before


def test_init_refuses_an_existing_home(ledger_with_seed: Cli) -> None:
    result = ledger_with_seed("init", ok=False)
    assert "already holds a ledger" in result.output


def test_commands_without_a_home_say_to_init(cli: Cli) -> None:
    result = cli("show", "7e18", ok=False)
    assert "kernelindex init" in result.output


# -------------------------------------------------------------- refusals


def _seed_with(seed_path: Path, tmp_path: Path, edit: Any) -> Path:
    seed = json.loads(seed_path.read_text())
    edit(seed)
    return write(tmp_path / "edited.json", seed)


@pytest.mark.parametrize(
    ("edit", "code", "words"),
    [
        (
            lambda s: s["run"]["spec"].__setitem__("surprise", 1),
            "schema-violation",
            "unknown field",
        ),
        (
            lambda s: s["run"]["spec"].__setitem__("protocolDigest", "sha256:" + "0" * 64),
            "digest-mismatch",
            "protocolDigest",
        ),
        (
            lambda s: s["environment"]["spec"]["hardware"].__setitem__("product", "NVIDIA H200"),
            "digest-mismatch",
            "environmentDigest",
        ),
    ],
)
def test_ingest_refuses_bad_manifests_and_stores_nothing(
    cli: Cli, seed_path: Path, tmp_path: Path, edit: Any, code: str, words: str
) -> None:
    cli("init")
    before = cli.event_count()
    result = cli("ingest", _seed_with(seed_path, tmp_path, edit), ok=False)
    assert f"error[{code}]" in result.output and words in result.output
    assert cli.event_count() == before


def test_ingest_refuses_duplicate_yaml_keys_and_oversized_files(cli: Cli, tmp_path: Path) -> None:
    cli("init")
    before = cli.event_count()
    dup = write(tmp_path / "dup.yaml", "run:\n  kind: BenchmarkRun\nrun: {}\n")
    assert "duplicate key" in cli("ingest", dup, ok=False).output
    big = write(tmp_path / "big.json", "[" + " " * (1024 * 1024) + "]")
    assert "error[too-large]" in cli("ingest", big, ok=False).output
    assert cli.event_count() == before


def test_attester_key_cannot_ingest(cli: Cli, seed_path: Path, tmp_path: Path) -> None:
    cli("init")
    alice = tmp_path / "alice.pem"
    cli("keys", "generate", alice)
    cli("keys", "register", alice, "--role", "attester", "--self")
    before = cli.event_count()
    result = cli("ingest", seed_path, "--key", alice, ok=False)
    assert "error[wrong-role]" in result.output and "needs ingester" in result.output
    assert cli.event_count() == before


def test_unknown_and_revoked_keys_cannot_attest(ledger_with_seed: Cli, tmp_path: Path) -> None:
    cli = ledger_with_seed
    mallory = tmp_path / "mallory.pem"
    cli("keys", "generate", mallory)
    before = cli.event_count()
    result = cli("attest", SEED_RUN, "--type", "note", "--body", "hi", "--key", mallory, ok=False)
    assert "error[unknown-key]" in result.output
    cli("keys", "register", mallory, "--role", "attester")
    cli("keys", "revoke", mallory, "--reason", "compromised")
    before = cli.event_count()
    result = cli("attest", SEED_RUN, "--type", "note", "--body", "hi", "--key", mallory, ok=False)
    assert "error[revoked-key]" in result.output
    assert cli.event_count() == before
    listed = {k["keyId"]: k["status"] for k in cli.json("keys", "list")["items"]}
    assert "revoked" in listed.values()


def test_self_registration_beyond_attester_is_refused(cli: Cli, tmp_path: Path) -> None:
    cli("init")
    eve = tmp_path / "eve.pem"
    cli("keys", "generate", eve)
    result = cli("keys", "register", eve, "--role", "ingester", "--self", ok=False)
    assert "error[wrong-role]" in result.output


def test_attest_on_an_unknown_run_is_refused(ledger_with_seed: Cli, tmp_path: Path) -> None:
    cli = ledger_with_seed
    alice = tmp_path / "alice.pem"
    cli("keys", "generate", alice)
    cli("keys", "register", alice, "--role", "attester", "--self")
    result = cli(
        "attest", "sha256:" + "ab" * 32, "--type", "note", "--body", "x", "--key", alice, ok=False
    )
    assert "error[not-found]" in result.output


def test_encrypted_key_needs_its_passphrase(cli: Cli, tmp_path: Path) -> None:
    key_path = tmp_path / "enc.pem"
    runner = CliRunner()
    made = runner.invoke(
        app, ["keys", "generate", str(key_path)], env={"KERNELINDEX_KEY_PASSPHRASE": "s3cret"}
    )
    assert made.exit_code == 0, made.output
    assert b"ENCRYPTED" in key_path.read_bytes()
    cli("init")
    result = cli("keys", "register", key_path, "--role", "attester", "--self", ok=False)
    assert "passphrase" in result.output


# -------------------------------------------------------------- tampering


def test_history_reports_a_tampered_event_instead_of_hiding_it(ledger_with_seed: Cli) -> None:
    cli = ledger_with_seed
    alter_stored_signature(
        cli.db_url, "select id, state from kernelindex_events where topic like '%Run.Ingested'"
    )
    result = cli("history", SEED_RUN, ok=False)
    assert result.exit_code == 1
    assert "FAILED" in result.stdout and "signature" in result.stdout
    events = json.loads(cli("history", SEED_RUN, "--json", ok=False).stdout)["events"]
    assert [e["verified"] for e in events] == [False]
    assert not cli.json("show", SEED_RUN)["shownEventsVerified"]


def test_history_reports_an_unreadable_record(ledger_with_seed: Cli) -> None:
    cli = ledger_with_seed
    engine = create_engine(cli.db_url)
    with engine.begin() as conn:
        conn.execute(
            text("update kernelindex_events set state = :s where topic like '%Run.Ingested'"),
            {"s": b"\x00garbage"},
        )
    engine.dispose()
    events = json.loads(cli("history", SEED_RUN, "--json", ok=False).stdout)["events"]
    assert events[0]["verified"] is False and events[0]["checks"][0]["name"] == "record-readable"


def test_console_script_is_installed() -> None:
    exe = shutil.which("kernelindex", path=str(Path(sys.executable).parent)) or shutil.which(
        "kernelindex"
    )
    assert exe is not None, "the kernelindex console script is not installed; pip install -e ."
    result = subprocess.run([exe, "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "digest" in result.stdout


def test_demo_builds_once_and_is_idempotent(tmp_path: Path, db_url: str) -> None:
    home = tmp_path / "demo"
    runner = CliRunner()
    first = runner.invoke(app, ["demo", "--home", str(home), "--db", db_url])
    assert first.exit_code == 0, first.output
    assert SEED_RUN in first.stdout and "verified; all: history" in first.stdout
    assert first.stdout.count("✓ verified") == 2
    engine = create_engine(db_url)
    with engine.connect() as conn:
        count = conn.execute(text("select count(*) from kernelindex_events")).scalar_one()
    second = runner.invoke(app, ["demo", "--home", str(home), "--db", db_url])
    assert second.exit_code == 0, second.output
    with engine.connect() as conn:
        assert conn.execute(text("select count(*) from kernelindex_events")).scalar_one() == count
    engine.dispose()


def test_the_demo_never_writes_into_the_ledger_the_environment_names(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$KERNELINDEX_HOME and $KERNELINDEX_DB name a user's own ledger: the demo builds in
    ./.kernelindex-demo with its own SQLite file (keys and database together), and refuses a
    home, given with --home, that holds a ledger other than a demo."""
    monkeypatch.chdir(tmp_path)
    cli = Cli(tmp_path / "mine", db_url)
    cli("init")
    before = cli.json("keys", "list")
    monkeypatch.setenv("KERNELINDEX_HOME", str(tmp_path / "mine"))
    monkeypatch.setenv("KERNELINDEX_DB", db_url)
    runner = CliRunner()
    built = runner.invoke(app, ["demo"])
    assert built.exit_code == 0, built.output
    demo = tmp_path / ".kernelindex-demo"
    assert (demo / "trust-root.json").exists() and (demo / "ledger.db").exists()
    assert cli.json("keys", "list") == before  # the user's ledger is untouched
    refused = runner.invoke(app, ["demo", "--home", str(tmp_path / "mine"), "--db", db_url])
    assert refused.exit_code != 0 and "not a demo" in refused.output
    assert cli.json("keys", "list") == before


def test_generated_public_key_file_registers_the_same_key(cli: Cli, tmp_path: Path) -> None:
    cli("init")
    key = cli.json("keys", "generate", tmp_path / "bob.pem")
    assert key["publicFile"].endswith("bob.pem.pub")
    # Someone else (the admin) registers Bob from the shared .pub file alone.
    cli("keys", "register", key["publicFile"], "--role", "attester")
    listed = {k["keyId"] for k in cli.json("keys", "list")["items"]}
    assert key["keyId"] in listed


def test_an_issue_report_is_a_signed_attestation_with_a_reason_that_moves_nothing(
    ledger_with_seed: Cli, tmp_path: Path
) -> None:
    cli = ledger_with_seed
    bob = tmp_path / "bob.pem"
    cli("keys", "generate", bob)
    cli("keys", "register", bob, "--role", "attester", "--self", "--label", "bob")
    before = cli.json("show", SEED_RUN)
    report = cli.json(
        "attest",
        SEED_RUN[:15],
        "--type",
        "issue_report",
        "--reason",
        "comparability",
        "--body",
        "measured on stack v1.0, not v1.1",
        "--key",
        bob,
    )
    assert report["event"] == "Run.Attested"
    after = cli.json("show", SEED_RUN)
    assert after["evidence"] == before["evidence"] and after.get("standings") == before.get(
        "standings"
    )
    events = cli.json("history", SEED_RUN)["events"]
    assert events[-1]["event"] == "Run.Attested" and events[-1]["verified"]
    assert "issue_report" in events[-1]["says"]
    count = cli.event_count()
    for refused in (
        ["--type", "issue_report"],  # a report names its reason
        ["--type", "note", "--reason", "license"],  # and only a report does
        ["--type", "issue_report", "--reason", "bribery"],  # one of KernelIndex's reasons
    ):
        result = cli("attest", SEED_RUN[:15], *refused, "--body", "x", "--key", bob, ok=False)
        assert result.exit_code in (1, 2), result.output
    assert cli.event_count() == count
