"""The log's witness client against our witness over HTTP: cosignatures gathered and checked,
each witness's size learned from 409 replies, a witness that is down or silent costing only
its cosignature, and the alarms (a witness ahead of the log, a split view) raised."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from live_server import free_port, live_server

from ledger.signing.keys import SigningKey
from ledger.witness.client import WitnessClient, WitnessEndpoint
from ledger.witness.cosignature import CosignerKey
from ledger.witness.policy import parse_policy, quorum_met
from ledger.witness.server import WitnessApp
from ledger.witness.witness import Witness, parse_follow
from tests.witness.witness_logs import ToyLog, request


@dataclass(frozen=True)
class Running:
    endpoint: WitnessEndpoint
    witness: Witness


@contextmanager
def running(state: Path, log: ToyLog, name: str) -> Iterator[Running]:
    key = SigningKey.generate()
    witness = Witness(name, key.private_key(), [parse_follow(f"{log.origin}={log.vkey}")], state)
    with witness, live_server(WitnessApp(witness)) as server:  # type: ignore[arg-type]
        yield Running(WitnessEndpoint(server.url, witness.key), witness)


@pytest.fixture
def log() -> ToyLog:
    return ToyLog.grown("example.org/log", 12)


@pytest.fixture
def three(tmp_path: Path, log: ToyLog) -> Iterator[list[Running]]:
    with ExitStack() as stack:
        yield [
            stack.enter_context(running(tmp_path / f"w{i}", log, f"w{i}.example")) for i in range(3)
        ]


def policy_text(log: ToyLog, keys: list[CosignerKey], rule: str) -> str:
    lines = [f"log {log.vkey}"] + [f"witness w{i} {k.key_string()}" for i, k in enumerate(keys)]
    members = " ".join(f"w{i}" for i in range(len(keys)))
    return "\n".join([*lines, f"group q {rule} {members}", "quorum q"]) + "\n"


def test_the_log_gathers_verified_cosignatures_and_tracks_each_witness(
    three: list[Running], log: ToyLog
) -> None:
    keys = [r.endpoint.key for r in three]
    with WitnessClient([r.endpoint for r in three]) as client:
        first = client.cosign(log.note(3), log.proof)
        assert [o.outcome for o in first.outcomes] == ["cosigned"] * 3
        assert client.sizes() == {"w0.example": 3, "w1.example": 3, "w2.example": 3}
        assert first.note == log.note(3) + first.lines
        assert quorum_met(parse_policy(policy_text(log, keys, "all")), first.note).met
        later = client.cosign(log.note(9), log.proof)  # old 3 and the proof 3 -> 9
        assert [o.outcome for o in later.outcomes] == ["cosigned"] * 3
        assert [r.witness.cosigned_size(log.origin) for r in three] == [9, 9, 9]
        assert not later.alarms


def test_a_409_teaches_the_client_the_witness_size(three: list[Running], log: ToyLog) -> None:
    witness = three[0]
    assert witness.witness.add_checkpoint(request(0, log.note(5))).status == 200  # from elsewhere
    asked: list[tuple[int, int]] = []

    def proof(old: int, new: int) -> list[bytes]:
        asked.append((old, new))
        return log.proof(old, new)

    with WitnessClient([witness.endpoint]) as client:
        assert client.sizes() == {"w0.example": 0}
        result = client.cosign(log.note(8), proof)
    (outcome,) = result.outcomes
    assert (outcome.outcome, outcome.witness_size) == ("cosigned", 8)
    assert asked == [(5, 8)]
    assert witness.witness.evidence() == []


def test_a_down_witness_costs_its_cosignature_not_the_checkpoint(
    three: list[Running], log: ToyLog
) -> None:
    down = WitnessEndpoint(
        f"http://127.0.0.1:{free_port()}",
        CosignerKey.from_private_key("down.example", SigningKey.generate().private_key()),
    )
    endpoints = [three[0].endpoint, three[1].endpoint, down]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)

    with WitnessClient(endpoints, attempts=3, backoff=0.01, sleep=sleep) as client:
        result = client.cosign(log.note(6), log.proof)
    kinds = {o.witness: o.outcome for o in result.outcomes}
    assert kinds == {
        "w0.example": "cosigned",
        "w1.example": "cosigned",
        "down.example": "unavailable",
    }
    assert slept == [0.01, 0.02]  # three tries, backing off
    keys = [three[0].endpoint.key, three[1].endpoint.key, down.key]
    two_of_three = quorum_met(parse_policy(policy_text(log, keys, "2")), result.note)
    assert two_of_three.met and two_of_three.cosigned == ("w0", "w1")
    all_three = quorum_met(parse_policy(policy_text(log, keys, "all")), result.note)
    assert (all_three.met, all_three.code) == (False, "quorum-not-met")


def test_a_silent_witness_times_out(log: ToyLog) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        key = CosignerKey.from_private_key("silent.example", SigningKey.generate().private_key())
        endpoint = WitnessEndpoint(f"http://127.0.0.1:{port}", key)
        with WitnessClient([endpoint], timeout=0.2, attempts=2, backoff=0.01) as client:
            (outcome,) = client.cosign(log.note(4), log.proof).outcomes
    assert outcome.outcome == "unavailable" and "Timeout" in outcome.detail


def test_a_witness_ahead_of_the_log_is_an_alarm(
    three: list[Running], log: ToyLog, caplog: pytest.LogCaptureFixture
) -> None:
    witness = three[0]
    with WitnessClient([witness.endpoint]) as client:
        client.cosign(log.note(10), log.proof)
    restored = ToyLog(log.origin, log.key, log.leaves[:8])  # the log, restored to size 8
    with caplog.at_level(logging.ERROR), WitnessClient([witness.endpoint]) as client:
        result = client.cosign(restored.note(8), restored.proof)
    (outcome,) = result.outcomes
    assert (outcome.outcome, outcome.alarm, outcome.witness_size) == ("ahead", True, 10)
    assert result.alarms == (outcome,) and result.cosignatures == ()
    assert "larger than this log's 8" in caplog.text


def test_a_split_view_is_cosigned_at_most_once(
    three: list[Running], log: ToyLog, caplog: pytest.LogCaptureFixture
) -> None:
    """Two logs with one origin and key that diverge after size 4: every witness that
    cosigned one refuses the other, and keeps the other's request as evidence."""
    fork = log.fork(4)
    endpoints = [r.endpoint for r in three]
    keys = [e.key for e in endpoints]
    policy = parse_policy(policy_text(log, keys, "2"))
    with WitnessClient(endpoints) as honest:
        shown = honest.cosign(log.note(8), log.proof)
    with caplog.at_level(logging.ERROR), WitnessClient(endpoints) as other:
        hidden = other.cosign(fork.note(8), fork.proof)  # learns 8, then the same size: 422
        further = other.cosign(fork.note(12), fork.proof)  # proof 8 -> 12 in the fork: 422
    assert quorum_met(policy, shown.note).met
    for result in (hidden, further):
        assert [o.outcome for o in result.outcomes] == ["inconsistent"] * 3
        verdict = quorum_met(policy, result.note)
        assert (verdict.met, verdict.cosigned) == (False, ())
    for r in three:
        assert r.witness.cosigned_size(log.origin) == 8
        # The first offer (old 0, a different root at the cosigned size) is evidence too.
        assert [e.status for e in r.witness.evidence()] == [409, 422, 422]
    assert "422 from old size 8" in caplog.text


def test_a_rolled_back_checkpoint_gets_no_cosignature(three: list[Running], log: ToyLog) -> None:
    with WitnessClient([three[0].endpoint]) as client:
        client.cosign(log.note(8), log.proof)
        (outcome,) = client.cosign(log.note(5), log.proof).outcomes
    assert (outcome.outcome, outcome.cosignature) == ("superseded", None)
    assert three[0].witness.add_checkpoint(request(8, log.note(5))).status == 400


def test_a_cosignature_by_another_key_is_not_kept(three: list[Running], log: ToyLog) -> None:
    expected = CosignerKey.from_private_key("w0.example", SigningKey.generate().private_key())
    wrong = WitnessEndpoint(three[0].endpoint.url, expected)
    with WitnessClient([wrong]) as client:
        result = client.cosign(log.note(3), log.proof)
    (outcome,) = result.outcomes
    assert outcome.outcome == "bad-cosignature" and result.note == log.note(3)
