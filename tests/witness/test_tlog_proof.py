"""C2SP tlog-proof@v1 files: the layout the spec gives (header, extra, index, proof lines, an
empty line, the checkpoint verbatim), read back exactly, and verified or refused by name:
a forged checkpoint, a quorum not met, another leaf, another index, a malformed file."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.proofs.reference import inclusion_proof
from ledger.signing.keys import SigningKey
from ledger.witness.cosignature import CosignerKey
from ledger.witness.policy import parse_policy
from ledger.witness.tlog_proof import (
    HEADER,
    TlogProof,
    TlogProofError,
    format_tlog_proof,
    parse_tlog_proof,
    verify_tlog_proof,
)
from ledger.witness.witness import Witness, parse_follow
from tests.witness.witness_logs import ToyLog, request


def data(i: int) -> bytes:
    return f"main leaf {i}".encode()  # what ToyLog hashes as leaf i


@pytest.fixture
def log() -> ToyLog:
    return ToyLog.grown("example.org/log", 9)


@pytest.fixture
def cosigned(log: ToyLog, tmp_path: Path) -> tuple[str, list[str]]:
    """The log's checkpoint of 9, cosigned by two of our witnesses; their vkeys."""
    note, vkeys = log.note(), []
    for i in range(2):
        follow = [parse_follow(f"{log.origin}={log.vkey}")]
        key = SigningKey.generate()
        with Witness(f"w{i}.example", key.private_key(), follow, tmp_path / f"w{i}") as w:
            reply = w.add_checkpoint(request(0, log.note()))
            assert reply.status == 200
            note += reply.body.decode()
            vkeys.append(w.key.key_string())
    return note, vkeys


def test_a_proof_file_has_the_specs_layout_and_reads_back(
    log: ToyLog, cosigned: tuple[str, list[str]]
) -> None:
    note, _ = cosigned
    proof = inclusion_proof(4, log.leaves)
    text = format_tlog_proof(4, proof, note, data(4))
    lines = text.split("\n")
    assert lines[:3] == [HEADER, "extra " + base64.b64encode(data(4)).decode(), "index 4"]
    assert lines[3 : 3 + len(proof)] == [base64.b64encode(h).decode() for h in proof]
    assert text.endswith("\n\n" + note)
    assert parse_tlog_proof(text) == TlogProof(4, tuple(proof), note, data(4))
    assert parse_tlog_proof(format_tlog_proof(4, proof, note)).extra is None


def test_a_proof_verifies_under_the_log_key_and_a_policy(
    log: ToyLog, cosigned: tuple[str, list[str]]
) -> None:
    note, vkeys = cosigned
    text = format_tlog_proof(4, inclusion_proof(4, log.leaves), note, data(4))
    keys = [log.key_verifier()]
    witnesses = "".join(f"witness w{i} {v}\n" for i, v in enumerate(vkeys))
    both = parse_policy(f"{witnesses}group q all w0 w1\nquorum q\n")
    proved = verify_tlog_proof(text, keys, origin=log.origin, policy=both)
    assert (proved.index, proved.checkpoint.size, proved.extra) == (4, 9, data(4))
    assert proved.quorum is not None and proved.quorum.cosigned == ("w0", "w1")

    stranger = SigningKey.generate().public.raw.hex()
    three = parse_policy(
        f"{witnesses}witness w2 {cosigner_vkey(stranger)}\ngroup q all w0 w1 w2\nquorum q\n"
    )
    cases = {
        "quorum-not-met": dict(policy=three),
        "unverified-checkpoint": dict(origin="example.org/other"),
        "not-included": dict(leaf_data=data(5)),
    }
    for code, options in cases.items():
        with pytest.raises(TlogProofError) as refused:
            verify_tlog_proof(text, keys, **{"origin": log.origin, **options})  # type: ignore[arg-type]
        assert refused.value.code == code
    forged = log.note(9, signer=SigningKey.generate())
    with pytest.raises(TlogProofError) as refused:
        verify_tlog_proof(
            format_tlog_proof(4, inclusion_proof(4, log.leaves), forged, data(4)), keys
        )
    assert refused.value.code == "unverified-checkpoint"


def cosigner_vkey(public_hex: str) -> str:
    return CosignerKey.from_public_key("w2.example", bytes.fromhex(public_hex)).key_string()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace(HEADER, "c2sp.org/tlog-proof@v2"), "first line"),
        (lambda t: t.replace("index 4", "index 04"), "index"),
        (lambda t: t.replace("\n\n", "\n"), "empty line"),
        (lambda t: t.replace("extra ", "extra !"), "base64"),
        (lambda t: t.replace("index 4\n", "index 4\nAAAA\n"), "32-byte"),
    ],
)
def test_malformed_files_are_refused_saying_why(
    log: ToyLog, cosigned: tuple[str, list[str]], edit: object, message: str
) -> None:
    text = format_tlog_proof(4, inclusion_proof(4, log.leaves), cosigned[0], data(4))
    with pytest.raises(TlogProofError, match=message):
        parse_tlog_proof(edit(text))  # type: ignore[operator]


@settings(max_examples=50, deadline=None)
@given(size=st.integers(1, 40), pick=st.integers(0, 39), extra=st.booleans())
def test_every_leaf_of_any_tree_round_trips_and_verifies(size: int, pick: int, extra: bool) -> None:
    log = ToyLog.grown("example.org/log", size)
    index = pick % size
    text = format_tlog_proof(
        index, inclusion_proof(index, log.leaves), log.note(), data(index) if extra else None
    )
    proved = verify_tlog_proof(text, [log.key_verifier()], leaf_data=None if extra else data(index))
    assert (proved.index, proved.checkpoint.size) == (index, size)
