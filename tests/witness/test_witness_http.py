"""Our witness over HTTP against c2sp.org/tlog-witness's status table: 200 with a verifying
cosignature line, 400, 403, 404, 409 with a ``text/x.tlog.size`` body, 422; its state kept
atomically with the old-size check (two requests from one old size: one wins, across
processes sharing the state file too), across restarts, and its evidence readable."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live_server import live_server

from ledger.proofs.signed_note import format_checkpoint, sign_note, split_note
from ledger.signing.keys import SigningKey
from ledger.witness.cosignature import CosignerKey, signature_lines
from ledger.witness.policy import parse_policy, quorum_met
from ledger.witness.server import WitnessApp, WitnessServeConfig, build_witness, serve
from ledger.witness.witness import Witness, origin_hash, parse_follow
from tests.witness.witness_logs import ToyLog, expected_statuses, request, statuses

NAME = "witness.example.com/w1"
KEY = SigningKey.generate()
COSIGNER = CosignerKey.from_private_key(NAME, KEY.private_key())


@pytest.fixture
def log() -> ToyLog:
    return ToyLog.grown("example.org/log", 8)


def make_witness(state: Path, log: ToyLog) -> Witness:
    return Witness(NAME, KEY.private_key(), [parse_follow(f"{log.origin}={log.vkey}")], state)


@pytest.fixture
def witness(tmp_path: Path, log: ToyLog) -> Witness:
    return make_witness(tmp_path / "state", log)


@pytest.fixture
def url(witness: Witness) -> Iterator[str]:
    with live_server(WitnessApp(witness)) as server:  # type: ignore[arg-type]
        yield server.url


def post(url: str, body: bytes) -> httpx.Response:
    return httpx.post(f"{url}/add-checkpoint", content=body, timeout=10)


def test_every_case_gets_the_status_the_spec_names(url: str, log: ToyLog) -> None:
    assert statuses(lambda body: post(url, body).status_code, log) == expected_statuses(log)


def test_a_200_is_one_cosignature_line_over_the_checkpoint(url: str, log: ToyLog) -> None:
    reply = post(url, request(0, log.note(4)))
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    text, _ = split_note(log.note(4))
    (line,) = signature_lines(text, reply.content)
    assert line.name == NAME and line.key_id == COSIGNER.key_id
    policy = parse_policy(f"log {log.vkey}\nwitness w1 {COSIGNER.key_string()}\nquorum w1\n")
    verdict = quorum_met(policy, log.note(4) + reply.text)
    assert verdict.met, verdict.reason
    # The same checkpoint again, from its own size: cosigned again (nothing to roll back).
    assert post(url, request(4, log.note(4))).status_code == 200


def test_a_409_names_the_size_last_cosigned(url: str, log: ToyLog) -> None:
    assert post(url, request(0, log.note(5))).status_code == 200
    stale = post(url, request(0, log.note(8)))
    assert stale.status_code == 409
    assert stale.headers["content-type"] == "text/x.tlog.size"
    assert stale.text == "5\n"
    assert post(url, request(5, log.note(8), log.proof(5, 8))).status_code == 200
    assert post(url, request(5, log.note(8), log.proof(5, 8))).text == "8\n"


def test_refusals_say_why(url: str, log: ToyLog) -> None:
    forged = post(url, request(0, log.note(4, SigningKey.generate())))
    assert (forged.status_code, forged.headers["content-type"]) == (
        403,
        "text/plain; charset=utf-8",
    )
    assert "no signature by a known key" in forged.text
    unknown = post(url, request(0, ToyLog.grown("example.net/x", 2).note()))
    assert unknown.status_code == 404 and "example.net/x" in unknown.text
    assert post(url, request(0, log.note(4))).status_code == 200
    rollback = post(url, request(4, log.note(3)))
    assert rollback.status_code == 400 and "above the checkpoint size" in rollback.text
    sixty_four = post(url, request(4, log.note(8), [log.root(1)] * 64))
    assert sixty_four.status_code == 400 and "63" in sixty_four.text
    not_utf8 = post(url, b"old 4\n\n\xff\xfe")
    assert not_utf8.status_code == 400


def test_a_size_zero_checkpoint_needs_the_empty_root_and_no_proof(
    tmp_path: Path, log: ToyLog
) -> None:
    witness = make_witness(tmp_path, log)
    not_empty = sign_note(
        format_checkpoint(log.origin, 0, log.root(1)), log.origin, log.key.private_key()
    )
    refused = witness.add_checkpoint(request(0, not_empty))
    assert (refused.status, refused.body) == (
        422,
        b"a tree of size 0 must have the empty-tree root\n",
    )
    empty = ToyLog(log.origin, log.key)
    assert witness.add_checkpoint(request(0, empty.note(0))).status == 200
    assert witness.add_checkpoint(request(0, log.note(3), [log.root(1)])).status == 422
    assert witness.cosigned_size(log.origin) == 0


def test_signed_but_inconsistent_requests_are_kept_as_evidence(
    url: str, witness: Witness, log: ToyLog
) -> None:
    fork = log.fork(3)
    assert post(url, request(0, log.note(4))).status_code == 200
    split = request(4, fork.note(6), fork.proof(4, 6))
    assert post(url, split).status_code == 422
    assert post(url, request(0, fork.note(4))).status_code == 409  # the cosigned size, forked
    assert post(url, request(0, log.note(6, SigningKey.generate()))).status_code == 403
    kept = witness.evidence(log.origin)
    assert [(e.status, e.old_size, e.cosigned_size) for e in kept] == [(422, 4, 4), (409, 0, 4)]
    assert kept[0].request == split and kept[0].cosigned_root == log.root(4)
    assert "inconsistent" in kept[0].reason
    assert witness.evidence("example.net/other") == []
    assert witness.cosigned_size(log.origin) == 4  # cosigned at most one of the two


def test_the_monitoring_path_serves_the_latest_cosigned_checkpoint(url: str, log: ToyLog) -> None:
    path = f"{url}/{origin_hash(log.origin)}/checkpoint"
    assert httpx.get(path).status_code == 404
    post(url, request(0, log.note(4)))
    post(url, request(4, log.note(7), log.proof(4, 7)))
    served = httpx.get(path)
    assert served.status_code == 200
    assert served.text.startswith(log.note(7))  # the log's own signature first, then ours
    policy = parse_policy(f"log {log.vkey}\nwitness w1 {COSIGNER.key_string()}\nquorum w1\n")
    assert quorum_met(policy, served.text).met
    assert httpx.get(f"{url}/{'0' * 64}/checkpoint").status_code == 404


def test_other_methods_paths_and_sizes(url: str) -> None:
    wrong = httpx.get(f"{url}/add-checkpoint")
    assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
    assert httpx.post(f"{url}/elsewhere", content=b"x").status_code == 404
    assert httpx.post(f"{url}/add-checkpoint", content=b"x" * (1 << 20 + 1)).status_code == 413


def test_the_state_survives_a_restart(tmp_path: Path, log: ToyLog) -> None:
    first = make_witness(tmp_path, log)
    assert first.add_checkpoint(request(0, log.note(6))).status == 200
    again = make_witness(tmp_path, log)
    reply = again.add_checkpoint(request(0, log.note(8)))
    assert (reply.status, reply.body) == (409, b"6\n")
    assert again.add_checkpoint(request(6, log.note(3))).status == 400


def test_two_requests_from_one_old_size_cannot_both_advance(tmp_path: Path, log: ToyLog) -> None:
    """The spec's rollback race, with two witness objects on one state file (as two
    processes would be): every round, of the requests that all start from the same cosigned
    size, exactly one is cosigned and the others learn its size."""
    log.grow(32)
    witnesses = [make_witness(tmp_path, log), make_witness(tmp_path, log)]
    assert witnesses[0].add_checkpoint(request(0, log.note(4))).status == 200
    old = 4
    for _round in range(3):
        sizes = [old + 1 + i for i in range(6)]
        results: dict[int, tuple[int, bytes]] = {}
        barrier = threading.Barrier(len(sizes))

        def send(
            size: int,
            old: int = old,
            barrier: threading.Barrier = barrier,
            results: dict[int, tuple[int, bytes]] = results,
        ) -> None:
            body = request(old, log.note(size), log.proof(old, size))
            barrier.wait()
            reply = witnesses[size % 2].add_checkpoint(body)
            results[size] = (reply.status, reply.body)

        threads = [threading.Thread(target=send, args=(s,)) for s in sizes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [s for s, (status, _) in results.items() if status == 200]
        assert len(winners) == 1, results
        (winner,) = winners
        for size, (status, body) in results.items():
            if size != winner:
                assert (status, body) == (409, f"{winner}\n".encode())
        assert witnesses[1].cosigned_size(log.origin) == winner
        old = winner


def test_serve_runs_the_witness_its_config_describes(tmp_path: Path, log: ToyLog) -> None:
    key_file = tmp_path / "witness.pem"
    KEY.save(key_file)
    other = ToyLog.grown("example.org/second", 3)
    config = WitnessServeConfig(
        name=NAME,
        key_file=key_file,
        follow=(f"{log.origin}={log.vkey}", other.vkey),  # a bare vkey names its origin
        state_dir=tmp_path / "state",
        port=0,
    )
    seen: list[tuple[str, int, int]] = []

    def run(app: object, host: str, port: int) -> None:
        with live_server(app) as server:  # type: ignore[arg-type]
            first = post(server.url, request(0, log.note(2))).status_code
            second = post(server.url, request(0, other.note())).status_code
            seen.append((host, first, second))

    serve(config, run)
    assert seen == [("127.0.0.1", 200, 200)]
    assert build_witness(config).cosigned_size(other.origin) == 3
    with pytest.raises(ValueError, match="at least one log"):
        build_witness(WitnessServeConfig(NAME, key_file, (), tmp_path))
    with pytest.raises(ValueError, match="--follow"):
        parse_follow("example.org/log=not-a-key")
    with pytest.raises(ValueError, match="own key"):
        Witness(NAME, KEY.private_key(), [parse_follow(f"x={ToyLog('x', KEY).vkey}")], tmp_path)
