"""Authoring builds every predicate through its domain model: what it signs, admission's
parse accepts; what admission's parse would refuse, authoring refuses before signing, with
the same message. Nothing malformed is ever signed by an honest client."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.statements import (
    PredicateType,
    StatementError,
    parse_predicate,
    parse_statement,
)
from domain.timestamps import format_time
from ledger.signing.authoring import attestation_envelope, lifecycle_envelope, rerun_envelope
from ledger.signing.dsse import stored_statement
from ledger.signing.keys import SigningKey
from tests.projections.projection_world import NAMES, SEED, Job, rerun_result

KEY = SigningKey.generate()
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TEXT = st.text(max_size=40) | st.sampled_from(["", "ok", "a\u2066b", "x\u200by", "\x07bell"])


def _admission_says(predicate_type: PredicateType, predicate: dict[str, Any]) -> str | None:
    """What admission's parse answers for this predicate as given: None when it accepts."""
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": NAMES[SEED], "digest": {"sha256": SEED.removeprefix("sha256:")}}],
        "predicateType": str(predicate_type),
        "predicate": predicate,
    }
    try:
        parse_predicate(parse_statement(statement))
    except StatementError as exc:
        return str(exc)
    return None


def _authoring_says(build: Any) -> tuple[dict[str, Any] | None, str | None]:
    try:
        envelope = build()
    except StatementError as exc:
        return None, str(exc)
    return stored_statement(envelope)["predicate"], None


@settings(max_examples=150, deadline=None)
@given(
    type_=st.sampled_from(["note", "reproduced", "issue_report", "rumour"]),
    body=TEXT,
    reason=st.none() | st.sampled_from(["license", "other", "because"]),
    url=st.none() | st.sampled_from(["https://example.org/x", "http://example.org", "nope"]),
)
def test_attestations_are_signed_exactly_when_admission_would_accept_them(
    type_: str, body: str, reason: str | None, url: str | None
) -> None:
    signed, refused = _authoring_says(
        lambda: attestation_envelope(
            SEED, NAMES[SEED], KEY, type_=type_, body=body, reason=reason, evidence_url=url, now=NOW
        )
    )
    as_given: dict[str, Any] = {"type": type_, "body": body, "issuedAt": format_time(NOW)}
    if url is not None:
        as_given["evidenceUrl"] = url
    if reason is not None:
        as_given["reason"] = reason
    assert refused == _admission_says(PredicateType.ATTESTATION, as_given)
    if signed is not None:
        assert signed == as_given  # signed as given: no field added, dropped or respelled


@settings(max_examples=80, deadline=None)
@given(
    action=st.sampled_from(["retract", "supersede", "delete"]),
    reason=TEXT,
    superseded_by=st.none() | st.sampled_from([SEED, "sha256:xyz"]),
)
def test_lifecycle_statements_are_signed_exactly_when_admission_would_accept_them(
    action: str, reason: str, superseded_by: str | None
) -> None:
    signed, refused = _authoring_says(
        lambda: lifecycle_envelope(
            SEED,
            NAMES[SEED],
            KEY,
            action=action,
            reason=reason,
            superseded_by=superseded_by,
            now=NOW,
        )
    )
    as_given: dict[str, Any] = {"action": action, "reason": reason, "issuedAt": format_time(NOW)}
    if superseded_by is not None:
        as_given["supersededBy"] = superseded_by
    assert refused == _admission_says(PredicateType.LIFECYCLE, as_given)
    if signed is not None:
        assert signed == as_given


JOB = Job(SEED, "0b8f2c9e-6f7c-4a53-9d07-0c1f3a2b4d5e", "ab" * 32, "NVIDIA B200", "sm_100")


def test_a_rerun_result_whose_summary_lies_about_its_cases_is_never_signed() -> None:
    honest = rerun_result(JOB)
    assert rerun_envelope(SEED, NAMES[SEED], KEY, result=honest, now=NOW)["signatures"]
    lying = rerun_result(JOB)
    lying["cases"][1]["status"] = "incorrect"  # the summary still says allCorrect
    with pytest.raises(StatementError, match=r"summary\.allCorrect must say"):
        rerun_envelope(SEED, NAMES[SEED], KEY, result=lying, now=NOW)


def test_a_rerun_result_with_a_reversed_interval_is_never_signed() -> None:
    reversed_ci = rerun_result(JOB, ci95=[1_900_000.0, 1_700_000.0])
    with pytest.raises(StatementError, match="ci95Ns"):
        rerun_envelope(SEED, NAMES[SEED], KEY, result=reversed_ci, now=NOW)
