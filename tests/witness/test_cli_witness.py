"""The README flow with witnesses, as a user runs it: three `kernelindex witness serve`
processes on loopback, a ledger made with them, the seed ingested, the witnesses asked
(`witness sync`), the bundle exported and verified against a 2-of-3 policy; the same bundle
with one cosignature removed fails a 3-of-3 policy by the check's name.

`init --witness` and `verify --policy` run as commands; the verdicts are also read from the
report itself (``VerificationPolicy(witness_policy=...)``), for the named check and reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_session import Cli
from live_server import free_port
from typer.testing import CliRunner

from api.cli.witness import app as witness_cli
from ledger.home import LedgerHome
from ledger.proofs.signed_note import split_note
from ledger.signing.trust import TrustRoot
from ledger.verification_report import Check, Report
from ledger.verify import Outcome, VerificationPolicy, outcome_of, verify_bundle_lines
from ledger.witness.cosignature import add_signature_lines
from ledger.witness.policy import read_policy_file

REPO = Path(__file__).resolve().parents[2]
WITNESS = [sys.executable, "-m", "api.cli.witness", "witness"]


def witness_cli_run(*args: object, env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(witness_cli, ["witness", *(str(a) for a in args)], env=env)
    assert result.exit_code == 0, result.output
    return result


@contextmanager
def witness_process(
    name: str, key: Path, port: int, root: Path, state: Path
) -> Iterator[subprocess.Popen[str]]:
    """`kernelindex witness serve`, following the ledger's trust root, until it answers."""
    log = state.parent / f"{name}.log"
    state.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as sink:
        process = subprocess.Popen(
            [
                *WITNESS,
                "serve",
                "--name",
                name,
                "--key",
                str(key),
                "--follow-trust-root",
                str(root),
                "--state",
                str(state),
                "--port",
                str(port),
            ],
            cwd=REPO,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            try:
                # The monitoring path of an origin it has cosigned nothing for: 404, once up.
                if httpx.get(f"http://127.0.0.1:{port}/{'0' * 64}/checkpoint").status_code == 404:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


def verify(bundle: Path, root: Path, policy: Path | None) -> Report:
    lines = bundle.read_text().splitlines(keepends=True)
    held = VerificationPolicy(
        trust_root=TrustRoot.load(root),
        witness_policy=read_policy_file(policy) if policy else None,
    )
    return verify_bundle_lines(lines, held, workers=1)


def policy_file(path: Path, witnesses: list[tuple[str, str]], rule: str) -> Path:
    lines = [f"witness {name} {vkey}" for name, vkey in witnesses]
    names = " ".join(name for name, _ in witnesses)
    path.write_text("\n".join([*lines, f"group q {rule} {names}", "quorum q"]) + "\n")
    return path


def test_init_with_three_witnesses_ingest_export_and_verify_a_quorum(
    tmp_path: Path, db_url: str, seed_path: Path
) -> None:
    names = [f"w{i}.witness.test" for i in range(3)]
    keys = [tmp_path / "witnesses" / f"{n}.pem" for n in names]
    vkeys = [
        witness_cli_run("key", "--name", n, k).stdout.strip()
        for n, k in zip(names, keys, strict=True)
    ]
    ports = [free_port() for _ in names]
    home = LedgerHome.at(tmp_path / "home", db_url)
    cli = Cli(home.path, db_url)
    # `kernelindex init --witness URL=VKEY` (x3): the policy is written, named by the root.
    options = [f"http://127.0.0.1:{p}={v}" for p, v in zip(ports, vkeys, strict=True)]
    cli("init", *(arg for o in options for arg in ("--witness", o)))
    assert "group witnesses 2 w0.witness.test w1.witness.test w2.witness.test" in (
        home.witness_policy_path.read_text()
    )
    cli("ingest", seed_path)
    root = home.trust_root_path
    env = {"KERNELINDEX_HOME": str(home.path), "KERNELINDEX_DB": db_url}
    with ExitStack() as stack:
        for name, key, port in zip(names, keys, ports, strict=True):
            state = tmp_path / "witnesses" / name
            stack.enter_context(witness_process(name, key, port, root, state))
        synced = json.loads(witness_cli_run("sync", "--json", env=env).stdout)
        assert [a["outcome"] for a in synced["asked"]] == ["cosigned"] * 3
        status = synced["status"]
        assert status["witnessLag"] == 0 and status["cosigned"]["witnesses"] == names
        shown = witness_cli_run("status", env=env).stdout
        assert f"cosigned  {status['size']} leaves by {', '.join(names)} (lag 0)" in shown

    bundle = tmp_path / "seed.bundle"
    cli("export", "--run", "7e18c26c", "-o", bundle)
    two_of_three = policy_file(
        tmp_path / "2-of-3.policy", list(zip(names, vkeys, strict=True)), "2"
    )
    report = verify(bundle, root, two_of_three)
    assert outcome_of(report) is Outcome.VERIFIED and report.passed[Check.WITNESSED] == 1
    shown = cli("verify", bundle, "--trust-root", root, "--policy", two_of_three).stdout
    assert shown.startswith(f"VERIFIED  {bundle}: "), shown
    # A home with witnesses commits its heads as a leaf of every commit from init on: the
    # run's completeness is under the checkpoint the witnesses cosigned.
    assert report.passed[Check.HEADS_MAP] >= 1  # the heads leaf, and each head it names
    assert "heads witnessed: the heads leaf is in the checkpoint" in shown, shown
    # With no --policy the trust root's own (2 of 3, from init) is the default.
    assert (
        verify(bundle, root, None)
        .facts["witnessed"]
        .startswith("yes: quorum witnesses of the trust root met")
    )

    # One witness's cosignature removed: 2 of 3 still holds, 3 of 3 fails by name.
    records = [json.loads(line) for line in bundle.read_text().splitlines()]
    checkpoint = next(r for r in records if r["type"] == "checkpoint")
    text, signatures = split_note(checkpoint["note"])
    kept = [s for s in signatures if s.name != names[2]]
    assert len(kept) == len(signatures) - 1
    checkpoint["note"] = add_signature_lines(text + "\n" + kept[0].line(), kept[1:])
    edited = tmp_path / "edited.bundle"
    edited.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert outcome_of(verify(edited, root, two_of_three)) is Outcome.VERIFIED
    all_three = policy_file(tmp_path / "3-of-3.policy", list(zip(names, vkeys, strict=True)), "all")
    failed = verify(edited, root, all_three)
    assert outcome_of(failed) is Outcome.FAILED
    refused = cli("verify", edited, "--trust-root", root, "--policy", all_three, ok=False)
    assert refused.exit_code == 1 and "witnessed" in refused.stdout, refused.stdout
    assert [(f.check, f.reason) for f in failed.findings] == [
        (
            Check.WITNESSED,
            f"quorum 'q' not met: cosigned by {names[0]}, {names[1]} (the witness policy from "
            "--policy)",
        )
    ]


@pytest.mark.parametrize(
    ("follow", "reason"),
    [
        ([], "a witness follows at least one log"),
        (["--follow", "example.org/log=not-a-vkey"], "--follow 'example.org/log=not-a-vkey'"),
    ],
)
def test_a_witness_with_nothing_it_can_follow_is_refused(
    tmp_path: Path, follow: list[str], reason: str
) -> None:
    key = tmp_path / "w.pem"
    witness_cli_run("key", "--name", "w.test", key)
    args = ["serve", "--name", "w.test", "--key", str(key), "--state", str(tmp_path / "s")]
    result = CliRunner().invoke(witness_cli, ["witness", *args, *follow])
    assert result.exit_code == 1
    assert "error[bad-witness]" in result.output and reason in result.output
