"""A real ledger's witnessing against other people's witnesses and verifiers: its checkpoints
cosigned by ours, ``aics-witness`` and the Go witness together (each round offers all three
the same checkpoint), its bundle verified against a 3-of-3 policy of the three, and its C2SP
tlog-proof files accepted by this project's verifier, by aics-tlog's offline verifier and by
the Go program over x/mod's ``note`` and ``tlog``; a proof with its index changed refused by
all three."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.application import Ledger
from ledger.bundle import export_bundle
from ledger.proof_files import write_tlog_proofs
from ledger.verification_report import Check
from ledger.verify import Outcome, VerificationPolicy, outcome_of, verify_bundle_lines
from ledger.witness.policy import parse_policy
from ledger.witness.tlog_proof import TlogProofError, verify_tlog_proof
from ledger.witnessing import Witnessing
from tests.interop.witness.witness_interop import (
    aics_proofs,
    aics_python,
    aics_witness,
    build_gowitness,
    go_proofs,
    go_witness,
)
from tests.witness.ledger_witnesses import ORIGIN, Operator, follows, local_witnesses, serving


@pytest.fixture(scope="module")
def python() -> Path:
    return aics_python()


@pytest.fixture(scope="module")
def gowitness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_gowitness(tmp_path_factory.mktemp("gowitness"))


@pytest.fixture
def operator() -> Operator:
    return Operator.make()


@pytest.fixture
def witnessed(
    db_url: str, tmp_path: Path, operator: Operator, python: Path, gowitness: Path
) -> Iterator[tuple[Operator, list[str], Ledger]]:
    ledger = operator.ledger(db_url)
    operator.register(ledger, 3)
    (ours,) = local_witnesses(tmp_path / "ours", 1)
    follow = f"{ORIGIN}={operator.log_vkey}"
    try:
        with (
            serving(ours, [follows(operator.root)]),
            aics_witness(
                python, tmp_path / "aics", "aics.example/w", ORIGIN, operator.log_vkey
            ) as aics,
            go_witness(gowitness, "go.example/w", [follow]) as go,
        ):
            endpoints = [ours.endpoint, aics.endpoint, go.endpoint]
            witnessing = Witnessing(ledger.tlog, endpoints)
            try:
                first = witnessing.round()
                operator.register(ledger, 2)
                later = witnessing.round()  # old 5, and the proof 5 -> 7, to each of them
            finally:
                witnessing.close()
            assert [o and o.outcome for o in first + later] == ["cosigned"] * 6
            vkeys = [e.key.key_string() for e in endpoints]
            yield operator, vkeys, ledger
    finally:
        ledger.close()


def test_a_ledger_cosigned_by_three_implementations_meets_a_policy_of_all_three(
    witnessed: tuple[Operator, list[str], Ledger],
) -> None:
    operator, vkeys, ledger = witnessed
    out = io.StringIO()
    export_bundle(ledger, out)
    lines = out.getvalue().splitlines(keepends=True)
    witnesses = "".join(f"witness w{i} {v}\n" for i, v in enumerate(vkeys))
    policy = parse_policy(f"{witnesses}group all3 all w0 w1 w2\nquorum all3\n")
    held = VerificationPolicy(trust_root=operator.root, witness_policy=policy)
    report = verify_bundle_lines(lines, held, workers=1)
    assert outcome_of(report) is Outcome.VERIFIED and report.passed[Check.WITNESSED] == 1
    assert report.facts["witnessed"].endswith("met at 7 leaves by w0, w1, w2")


def test_every_proof_file_verifies_here_in_aics_tlog_and_in_go(
    witnessed: tuple[Operator, list[str], Ledger],
    tmp_path: Path,
    python: Path,
    gowitness: Path,
) -> None:
    operator, vkeys, ledger = witnessed
    written = write_tlog_proofs(ledger, range(7), tmp_path / "proofs")
    assert (written.files, written.checkpoint_size, written.cosignatures) == (7, 7, 3)
    files = sorted((tmp_path / "proofs").iterdir(), key=lambda p: int(p.name.split(".")[0]))
    texts = [f.read_text() for f in files]
    witnesses = "".join(f"witness w{i} {v}\n" for i, v in enumerate(vkeys))
    policy = parse_policy(f"log {operator.log_vkey}\n{witnesses}group q 3 w0 w1 w2\nquorum q\n")
    log = policy.logs[0].key
    assert [verify_tlog_proof(t, [log], origin=ORIGIN, policy=policy).index for t in texts] == list(
        range(7)
    )
    wrong = texts[3].replace("\nindex 3\n", "\nindex 2\n")
    with pytest.raises(TlogProofError) as refused:
        verify_tlog_proof(wrong, [log], origin=ORIGIN, policy=policy)
    assert refused.value.code == "not-included"

    items = [{"proof": t, "log": operator.log_vkey, "witnesses": vkeys} for t in [*texts, wrong]]
    go = go_proofs(gowitness, items)
    assert [r["ok"] for r in go] == [True] * 7 + [False]
    assert all(len(r["cosigned"]) == 3 and r["size"] == 7 for r in go[:7])
    aics = aics_proofs(python, [i | {"quorum": 3, "origin": ORIGIN} for i in items])
    assert [r["ok"] for r in aics] == [True] * 7 + [False], [r["error"] for r in aics]
    assert json.dumps([r["index"] for r in aics[:7]]) == json.dumps(list(range(7)))
