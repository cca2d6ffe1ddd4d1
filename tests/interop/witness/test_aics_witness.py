"""Our witness protocol against ``aics-witness`` and ``aics-tlog`` (PyPI, run from their own
Python >= 3.12 venv): our log client is answered and cosigned by aics-witness (409 size
discovery, rollback, a split view, a witness that is down); aics-tlog's ``verify_checkpoint``
accepts our witness's cosignatures and refuses tampered ones; aics-witness and ours give the
same status to every forged, rolled-back and inconsistent request."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ledger.signing.keys import SigningKey
from ledger.witness.client import WitnessClient
from ledger.witness.policy import parse_policy, quorum_met
from ledger.witness.witness import Witness, parse_follow
from tests.interop.witness.witness_interop import aics_check, aics_python, aics_witness
from tests.witness.witness_logs import ToyLog, expected_statuses, request, statuses

AICS_NAME = "aics.example/w1"


@pytest.fixture(scope="module")
def python() -> Path:
    return aics_python()


@pytest.fixture
def log() -> ToyLog:
    return ToyLog.grown("example.org/log", 12)


@pytest.fixture
def ours(tmp_path: Path, log: ToyLog) -> Iterator[Witness]:
    key = SigningKey.generate()
    follow = [parse_follow(f"{log.origin}={log.vkey}")]
    with Witness("ours.example/w1", key.private_key(), follow, tmp_path / "ours") as witness:
        yield witness


def test_aics_witness_and_ours_give_each_request_the_same_status(
    python: Path, ours: Witness, log: ToyLog, tmp_path: Path
) -> None:
    expected = expected_statuses(log)
    assert statuses(lambda body: ours.add_checkpoint(body).status, log) == expected
    with aics_witness(python, tmp_path / "aics", AICS_NAME, log.origin, log.vkey) as aics:
        post = lambda body: httpx.post(f"{aics.url}/add-checkpoint", content=body).status_code  # noqa: E731
        assert statuses(post, log) == expected


def test_our_client_is_cosigned_by_aics_witness(python: Path, log: ToyLog, tmp_path: Path) -> None:
    with aics_witness(python, tmp_path / "aics", AICS_NAME, log.origin, log.vkey) as aics:
        key = aics.endpoint.key
        policy = parse_policy(f"log {log.vkey}\nwitness a {key.key_string()}\nquorum a\n")
        with WitnessClient([aics.endpoint]) as client:
            first = client.cosign(log.note(3), log.proof)
            later = client.cosign(log.note(10), log.proof)  # old 3, proof 3 -> 10
            rolled_back = client.cosign(log.note(6), log.proof)
        assert [o.outcome for o in (*first.outcomes, *later.outcomes)] == ["cosigned"] * 2
        assert quorum_met(policy, first.note).met and quorum_met(policy, later.note).met
        assert rolled_back.outcomes[0].outcome == "superseded"
        # A fresh client (size 0) learns aics-witness's size from its 409.
        with WitnessClient([aics.endpoint]) as fresh:
            (outcome,) = fresh.cosign(log.note(12), log.proof).outcomes
        assert (outcome.outcome, fresh.sizes()) == ("cosigned", {AICS_NAME: 12})
        # A split view: the same origin and key, other leaves after 6.
        fork = log.fork(6)
        with WitnessClient([aics.endpoint]) as other:
            (split,) = other.cosign(fork.note(12), fork.proof).outcomes
        assert (split.outcome, split.alarm) == ("inconsistent", True)
        endpoint = aics.endpoint
    with WitnessClient([endpoint], attempts=2, backoff=0.01) as client:  # stopped: down
        (down,) = client.cosign(log.note(12), log.proof).outcomes
    assert down.outcome == "unavailable"


def test_aics_tlog_accepts_our_cosignatures_and_refuses_tampered_ones(
    python: Path, ours: Witness, log: ToyLog, tmp_path: Path
) -> None:
    second_key = SigningKey.generate()
    follow = [parse_follow(log.vkey)]
    with Witness("ours.example/w2", second_key.private_key(), follow, tmp_path / "w2") as second:
        replies = [w.add_checkpoint(request(0, log.note(7))) for w in (ours, second)]
    assert [r.status for r in replies] == [200, 200]
    cosigned = log.note(7) + "".join(r.body.decode() for r in replies)
    keys = [ours.key.key_string(), second.key.key_string()]
    line = replies[0].body.decode()
    blob = line.split(" ")[2].strip()
    raw = bytearray(base64.b64decode(blob))
    raw[11] ^= 1  # another timestamp under the same signature
    retimed = line.replace(blob, base64.b64encode(bytes(raw)).decode())
    item = {"log": log.vkey, "witnesses": keys, "quorum": 2}
    results = aics_check(
        python,
        [
            item | {"note": cosigned},
            item | {"note": log.note(7) + retimed, "quorum": 1},
            item | {"note": log.note(8) + line, "quorum": 1},  # moved to another tree
            item | {"note": log.note(7) + replies[1].body.decode()},  # one of two
        ],
    )
    good, tampered, moved, short = results
    assert good["ok"] and good["cosigned"] == ["ours.example/w1", "ours.example/w2"], good
    assert good["size"] == 7
    assert not tampered["ok"] and "failed verification" in tampered["error"]
    assert not moved["ok"] and "failed verification" in moved["error"]
    assert not short["ok"] and "quorum not met" in short["error"]
