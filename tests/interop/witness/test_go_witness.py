"""Our witness protocol against a witness and a cosignature checker written in Go over
``golang.org/x/mod/sumdb/note`` and ``tlog`` (``gowitness``, this folder): our log client
is answered and cosigned by the Go witness (409 size discovery, a witness that is down, a
split view); the Go checker accepts our witness's cosignatures and refuses tampered ones;
both witnesses give the same status to every forged, rolled-back and inconsistent request."""

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
from tests.interop.witness.witness_interop import build_gowitness, go_check, go_witness
from tests.witness.witness_logs import ToyLog, expected_statuses, request, statuses

GO_NAME = "go.example/w1"


@pytest.fixture(scope="module")
def gowitness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_gowitness(tmp_path_factory.mktemp("gowitness"))


@pytest.fixture
def log() -> ToyLog:
    return ToyLog.grown("example.org/log", 12)


@pytest.fixture
def ours(tmp_path: Path, log: ToyLog) -> Iterator[Witness]:
    key = SigningKey.generate()
    follow = [parse_follow(f"{log.origin}={log.vkey}")]
    with Witness("ours.example/w1", key.private_key(), follow, tmp_path / "ours") as witness:
        yield witness


def test_both_witnesses_give_each_request_the_same_status(
    gowitness: Path, ours: Witness, log: ToyLog
) -> None:
    expected = expected_statuses(log)
    assert statuses(lambda body: ours.add_checkpoint(body).status, log) == expected
    with go_witness(gowitness, GO_NAME, [f"{log.origin}={log.vkey}"]) as go:
        post = lambda body: httpx.post(f"{go.url}/add-checkpoint", content=body).status_code  # noqa: E731
        assert statuses(post, log) == expected


def test_our_client_is_cosigned_by_the_go_witness(gowitness: Path, log: ToyLog) -> None:
    with go_witness(gowitness, GO_NAME, [f"{log.origin}={log.vkey}"]) as go:
        policy = parse_policy(
            f"log {log.vkey}\nwitness go {go.endpoint.key.key_string()}\nquorum go\n"
        )
        with WitnessClient([go.endpoint]) as client:
            first = client.cosign(log.note(3), log.proof)
            later = client.cosign(log.note(11), log.proof)  # old 3, proof 3 -> 11
        assert [o.outcome for o in (*first.outcomes, *later.outcomes)] == ["cosigned"] * 2
        assert quorum_met(policy, first.note).met and quorum_met(policy, later.note).met
        # A fresh client (size 0) learns the Go witness's size from its 409.
        with WitnessClient([go.endpoint]) as fresh:
            (outcome,) = fresh.cosign(log.note(12), log.proof).outcomes
        assert (outcome.outcome, fresh.sizes()) == ("cosigned", {GO_NAME: 12})
        # A split view: the same origin and key, other leaves after 6.
        fork = log.fork(6)
        with WitnessClient([go.endpoint]) as other:
            (split,) = other.cosign(fork.note(12), fork.proof).outcomes
        assert (split.outcome, split.alarm) == ("inconsistent", True)
        # Down: the log is told, and goes on.
        endpoint = go.endpoint
    with WitnessClient([endpoint], attempts=2, backoff=0.01) as client:
        (down,) = client.cosign(log.note(12), log.proof).outcomes
    assert down.outcome == "unavailable"


def test_the_go_checker_accepts_our_cosignatures_and_refuses_tampered_ones(
    gowitness: Path, ours: Witness, log: ToyLog, tmp_path: Path
) -> None:
    second_key = SigningKey.generate()
    follow = [parse_follow(log.vkey)]
    with Witness("ours.example/w2", second_key.private_key(), follow, tmp_path / "w2") as second:
        lines = [w.add_checkpoint(request(0, log.note(7))) for w in (ours, second)]
    assert [r.status for r in lines] == [200, 200]
    cosigned = log.note(7) + "".join(r.body.decode() for r in lines)
    keys = [ours.key.key_string(), second.key.key_string()]
    ours_line = lines[0].body.decode()
    blob = ours_line.split(" ")[2].strip()
    raw = bytearray(base64.b64decode(blob))
    raw[11] ^= 1  # another timestamp under the same signature
    retimed = ours_line.replace(blob, base64.b64encode(bytes(raw)).decode())
    items = [
        {"note": cosigned, "log": log.vkey, "witnesses": keys},
        {"note": log.note(7) + retimed, "log": log.vkey, "witnesses": keys},
        {"note": log.note(8) + ours_line, "log": log.vkey, "witnesses": keys},  # another tree
        {"note": cosigned, "log": ToyLog.grown(log.origin, 1).vkey, "witnesses": keys},
    ]
    good, tampered, moved, wrong_log = go_check(gowitness, items)
    assert good["ok"] and good["cosigned"] == ["ours.example/w1", "ours.example/w2"]
    assert good["size"] == 7 and all(t > 1_600_000_000 for t in good["timestamps"].values())
    assert not tampered["ok"] and "invalid signature" in tampered["error"]
    assert not moved["ok"] and "invalid signature" in moved["error"]
    assert not wrong_log["ok"]
    # Our verifier agrees on all four.
    policy = parse_policy(
        f"log {log.vkey}\nwitness a {keys[0]}\nwitness b {keys[1]}\ngroup q all a b\nquorum q\n"
    )
    assert [quorum_met(policy, item["note"]).code for item in items[:3]] == [
        "quorum-met",
        "invalid-cosignature",
        "invalid-cosignature",
    ]
