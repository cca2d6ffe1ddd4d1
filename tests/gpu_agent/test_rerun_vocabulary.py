"""Nothing the solution controls is signed verbatim (issue 32): a rerun/v1 result speaks only
the rerun vocabulary (domain/statements.py), the agent builds nothing else, and admission
refuses anything else; results admitted before the vocabulary still read and verify."""

from __future__ import annotations

import copy
import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import DomainError
from domain.statements import (
    CASE_REASONS,
    CaseReason,
    Defence,
    JobFailure,
    PredicateType,
    build_predicate,
    make_statement,
)
from domain.timestamps import format_time, utc_now
from gpu_agent.case_task import CaseOutcome
from gpu_agent.result_assembly import case_record
from ledger import admission_checks
from ledger.aggregates import run_id
from ledger.signing.authoring import rerun_claim_envelope
from ledger.signing.dsse import sign_envelope
from ledger.store.stored_events import decode_stored
from tests.gpu_agent.test_agent_loop import (  # noqa: F401 - loop: the live-ledger fixture
    Loop,
    _python_folder,
    loop,
)
from tests.paths import FIXTURES

# --- end to end: a solution's exception text never reaches the signed record ---------------


def _raising_solution(message: str) -> dict[str, Any]:
    """A PyTorch RMSNorm whose entry point raises an exception holding ``message`` — what a
    solution that read the agent's key and nonce would do to publish them."""
    hack = json.loads(
        (FIXTURES / "sol-execbench" / "reward-hacks" / "solution_hack_lazy_output.json").read_text()
    )
    source = f"""
import torch

def run(hidden_states, weight):
    raise RuntimeError("stolen: {message}")
"""
    return dict(hack, name="rmsnorm_raises", sources=[{"path": "kernel.py", "content": source}])


def _pieces(secret: str, width: int = 8) -> set[str]:
    return {secret[i : i + width] for i in range(len(secret) - width + 1)}


def _leaks(text: str, secret: str) -> list[str]:
    return sorted(piece for piece in _pieces(secret) if piece in text)


def test_a_solutions_exception_text_is_never_signed_stored_or_shown(
    loop: Loop, tmp_path: Path
) -> None:
    secret = secrets.token_hex(32)
    folder = _python_folder(tmp_path, "raises", _raising_solution(secret))
    run = loop.submit_folder_and_request(folder, 40_000_000)
    outcome = loop.agent.run_once()
    assert outcome is not None and (outcome.outcome, outcome.all_correct) == ("completed", False)

    history = httpx.get(f"{loop.url}/v1/runs/{run}/history").json()
    assert _leaks(json.dumps(history), secret) == []
    ledger = loop.home.open()
    for record in ledger.stored_records(run_id(run)):
        _, statement = decode_stored(record.state)
        assert _leaks(record.state.decode("utf-8", "replace"), secret) == []
        assert _leaks(json.dumps(statement), secret) == []

    recorded = history["events"][-1]
    assert recorded["event"] == "Run.RerunRecorded" and recorded["verified"]
    cases = recorded["predicate"]["cases"]
    assert {c["reason"] for c in cases} == {"solution-raised"}, cases
    assert "FAILED correctness (solution-raised ×2)" in recorded["says"]


# --- admission: a hand-built result with free text is refused, and nothing is stored --------


def _claimed(loop: Loop) -> tuple[str, dict[str, Any]]:
    """A run with an open rerun job, claimed by the loop's agent: the run and the job."""
    run = loop.submit_and_request("rmsnorm_h4096_bf16")
    agent = loop.agent
    (job,) = agent.api.open_jobs(agent.device, agent.key.key_id)
    claim = rerun_claim_envelope(
        job["runDigest"],
        job["runName"],
        agent.key,
        job_id=job["jobId"],
        device=agent.device.claim_json(),
        lease_seconds=600,
    )
    return run, agent.api.claim(job["jobId"], claim)["job"]


def _result(job: dict[str, Any], device: dict[str, str], reason: str) -> dict[str, Any]:
    return {
        "protocol": "kernelindex-rerun-v1",
        "issuedAt": format_time(utc_now()),
        "jobId": job["jobId"],
        "nonce": job["nonce"],
        "cases": [{"case": "c", "status": "error", "reason": reason}],
        "summary": {"allCorrect": False, "samples": 0},
        "environment": {**device},
        "calibration": {},
    }


def test_a_result_with_a_free_text_reason_is_refused_at_admission(loop: Loop) -> None:
    run, job = _claimed(loop)
    device = loop.agent.device.claim_json()
    ledger = loop.home.open()
    before = len(ledger.stored_records(run_id(run)))
    # Signed by hand: the client-side check (rerun_envelope) would refuse to sign it.
    leaked = "RuntimeError: stolen key " + secrets.token_hex(32)
    statement = make_statement(
        job["runName"], run, PredicateType.RERUN, _result(job, device, leaked)
    )
    reply = httpx.post(
        f"{loop.url}/v1/runs/{run}/reruns", json=sign_envelope(statement, loop.agent.key)
    )
    assert reply.status_code == 422, reply.text
    problem = reply.json()
    assert problem["code"] == "schema-violation"
    assert "rerun vocabulary" in problem["detail"]
    assert "stolen key" not in reply.text  # the refusal does not echo it either
    assert len(ledger.stored_records(run_id(run))) == before

    # The same result in the vocabulary's words is admitted.
    statement = make_statement(
        job["runName"], run, PredicateType.RERUN, _result(job, device, "solution-raised")
    )
    reply = httpx.post(
        f"{loop.url}/v1/runs/{run}/reruns", json=sign_envelope(statement, loop.agent.key)
    )
    assert reply.status_code == 201, reply.text
    assert len(ledger.stored_records(run_id(run))) == before + 1


def test_a_result_admitted_before_the_vocabulary_still_reads_and_verifies(
    loop: Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old ledger holds results with free-text reasons: history (and so pages and verify,
    which re-check stored events the same way) still reads them as verified."""
    run, job = _claimed(loop)
    device = loop.agent.device.claim_json()
    older = _result(job, device, "the case child exited with code 3 before reporting")
    older["cases"][0]["defences"] = [{"name": "custom-check", "outcome": "failed", "detail": "x"}]
    statement = make_statement(job["runName"], run, PredicateType.RERUN, older)
    # Admission as it was before the vocabulary: the predicate read without the new rules.
    original = admission_checks.parse_predicate
    monkeypatch.setattr(
        admission_checks, "parse_predicate", lambda statement: original(statement, stored=True)
    )
    reply = httpx.post(
        f"{loop.url}/v1/runs/{run}/reruns", json=sign_envelope(statement, loop.agent.key)
    )
    assert reply.status_code == 201, reply.text
    monkeypatch.undo()
    events = httpx.get(f"{loop.url}/v1/runs/{run}/history").json()["events"]
    assert events[-1]["event"] == "Run.RerunRecorded"
    assert events[-1]["verified"], events[-1]
    assert events[-1]["predicate"]["cases"][0]["reason"].startswith("the case child")


# --- the model: exactly the vocabulary, on admission; anything readable once stored --------

BASE: dict[str, Any] = {
    "protocol": "kernelindex-rerun-v1",
    "issuedAt": "2026-12-06T00:00:00Z",
    "jobId": "0a0a0a0a-1111-4222-8333-444455556666",
    "nonce": "5e" * 32,
    "cases": [{"case": "c", "status": "incorrect", "reason": "output-mismatch"}],
    "summary": {"allCorrect": False, "samples": 0},
    "environment": {
        "product": "CPU test backend (not a GPU)",
        "architecture": "cpu",
        "gpuUuidHash": "0" * 64,
        "backend": "cpu-test",
    },
    "calibration": {},
}
FAILURES = {f.value for f in JobFailure}
DEFENCES = {d.value for d in Defence}
# Vocabulary words, near misses of them, and any text at all.
WORDS = st.one_of(
    st.sampled_from(sorted(CASE_REASONS | FAILURES | DEFENCES)),
    st.sampled_from(sorted(CASE_REASONS)).map(lambda w: w + " "),
    st.sampled_from(sorted(CASE_REASONS)).map(str.upper),
    st.sampled_from(sorted(DEFENCES)).map(lambda d: "reward-hack:" + d + "x"),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
)


def _admits(predicate: dict[str, Any], *, stored: bool = False) -> bool:
    try:
        build_predicate(PredicateType.RERUN, predicate, stored=stored)
    except DomainError:
        return False
    return True


def _with_case_reason(reason: str) -> dict[str, Any]:
    predicate = copy.deepcopy(BASE)
    predicate["cases"][0]["reason"] = reason
    return predicate


def _with_failure(failure: str) -> dict[str, Any]:
    predicate = copy.deepcopy(BASE)
    predicate["outcome"] = "failed"
    predicate["failure"] = failure
    predicate["cases"] = [{"case": "job", "status": "error", "reason": "job-failed"}]
    return predicate


def _with_defence(name: str) -> dict[str, Any]:
    predicate = copy.deepcopy(BASE)
    predicate["cases"][0]["defences"] = [{"name": name, "outcome": "passed"}]
    return predicate


@settings(max_examples=300, deadline=None)
@given(WORDS)
def test_admission_takes_exactly_the_vocabulary(word: str) -> None:
    assert _admits(_with_case_reason(word)) == (word in CASE_REASONS)
    assert _admits(_with_failure(word)) == (word in FAILURES)
    assert _admits(_with_defence(word)) == (word in DEFENCES)


@settings(max_examples=100, deadline=None)
@given(st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=200))
def test_stored_results_with_free_text_still_read(text: str) -> None:
    assert _admits(_with_case_reason(text), stored=True)
    assert _admits(_with_failure(text), stored=True)
    with_detail = _with_case_reason("output-mismatch")
    with_detail["cases"][0]["defences"] = [{"name": "sandbox", "outcome": "passed", "detail": text}]
    assert _admits(with_detail, stored=True)
    assert not _admits(with_detail)


def test_a_passed_case_carries_no_reason() -> None:
    passed = copy.deepcopy(BASE)
    passed["cases"] = [{"case": "c", "status": "passed"}]
    passed["summary"] = {"allCorrect": True, "samples": 0}
    assert _admits(passed)
    for words in ("timing: 50 samples after 10 warm-up launches", "output-mismatch"):
        passed["cases"][0]["reason"] = words
        assert not _admits(passed)
    assert _admits(_with_case_reason(str(CaseReason.TIMEOUT)))


# --- the agent: what a case child reports is taken in the vocabulary's terms only -----------


def test_a_child_report_outside_the_vocabulary_becomes_an_invalid_report() -> None:
    """A case child holds the solution, so its report may be forged: a code, defence name or
    timer that is not a word of the vocabulary makes the case an ``invalid-report`` error,
    and the child's words never reach the record."""
    secret = secrets.token_hex(16)
    forged = [
        CaseOutcome("error", secret, code=secret),
        CaseOutcome(secret),
        CaseOutcome(
            "incorrect",
            secret,
            code="output-mismatch",
            defences=[{"name": secret, "outcome": "failed", "detail": secret}],
        ),
        CaseOutcome(
            "passed",
            secret,
            timer_cross_check={"timer": secret, "reference": "x", "outcome": "passed"},
        ),
    ]
    for outcome in forged:
        record = case_record("c", outcome)
        assert record == {"case": "c", "status": "error", "reason": "invalid-report"}


def test_a_child_report_in_the_vocabulary_keeps_its_numbers_and_drops_its_words() -> None:
    outcome = CaseOutcome(
        "incorrect",
        "round secret: tolerance: output: only 9 of 16 elements within tolerance " + "x" * 50,
        max_abs_error=0.5,
        defences=[{"name": "secret-round", "outcome": "failed", "detail": "words", "runs": 1}],
    )
    record = case_record("c", outcome)
    assert record == {
        "case": "c",
        "status": "incorrect",
        "maxAbsError": 0.5,
        "reason": "output-mismatch",  # read from the declarative child's agent-made words
        "round": "secret",
        "defences": [{"name": "secret-round", "outcome": "failed", "checks": 1}],
    }
    passed = case_record("c", CaseOutcome("passed", "timing: 50 samples", stopped_by="rse"))
    assert passed == {"case": "c", "status": "passed", "stoppedBy": "rse"}
