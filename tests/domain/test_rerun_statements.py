"""Rerun results must be internally consistent before the ledger admits them: the views and
the ranking read these numbers, so a contradictory result is refused, not folded."""

from __future__ import annotations

from typing import Any

import pytest

from domain.statements import MAX_RERUN_SAMPLES, RerunSummary, StatementError, validate_part


def summary(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "allCorrect": True,
        "medianNs": 1_700_000.0,
        "ci95Ns": [1_690_000.0, 1_710_000.0],
        "samples": 3,
        "samplesNs": [1_690_000.0, 1_700_000.0, 1_720_000.0],
    }
    return base | overrides


def test_consistent_summary_is_accepted() -> None:
    validate_part(RerunSummary, summary())
    validate_part(RerunSummary, summary(samplesNs=None, samples=80))


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"ci95Ns": [1_710_000.0, 1_690_000.0]}, "low <= high"),
        ({"medianNs": 1_000.0}, "median of samplesNs"),
        ({"medianNs": None}, "median of samplesNs"),
        ({"samples": 4}, "number of samplesNs"),
        (
            {"samplesNs": [1.0] * (MAX_RERUN_SAMPLES + 1), "samples": MAX_RERUN_SAMPLES + 1},
            "length <= 2000",
        ),
        ({"medianNs": -5.0}, r"medianNs: Expected `float` >= 0"),
    ],
)
def test_contradictory_summaries_are_refused(overrides: dict[str, Any], words: str) -> None:
    with pytest.raises(StatementError, match=words):
        validate_part(RerunSummary, summary(**overrides))


def _result(cases: list[str], all_correct: bool, **extra: Any) -> dict[str, Any]:
    return {
        "issuedAt": "2026-12-01T00:00:00Z",
        "jobId": "00000000-0000-4000-8000-000000000000",
        "nonce": "0" * 64,
        "protocol": "kernelindex-rerun-v1",
        "cases": [{"case": f"c{i}", "status": status} for i, status in enumerate(cases)],
        "summary": summary(allCorrect=all_correct),
        "environment": {
            "product": "NVIDIA B200",
            "architecture": "sm_100",
            "gpuUuidHash": "a" * 64,
            "backend": "cuda",
        },
        "calibration": {},
        **extra,
    }


@pytest.mark.parametrize(
    ("cases", "all_correct", "ok"),
    [
        (["passed", "passed"], True, True),
        (["passed", "incorrect"], False, True),
        (["passed", "incorrect"], True, False),  # issue 13 §8: it moved the run to verified
        (["error"], True, False),
        (["passed", "timeout"], True, False),
        (["passed"], False, False),
    ],
)
def test_the_summary_says_what_the_cases_say(cases: list[str], all_correct: bool, ok: bool) -> None:
    from domain.statements import RerunPredicate

    value = _result(cases, all_correct)
    if ok:
        validate_part(RerunPredicate, value)
    else:
        with pytest.raises(StatementError, match="allCorrect"):
            validate_part(RerunPredicate, value)


@pytest.mark.parametrize(
    "text",
    [
        "fine\u202egnp.exe",  # right-to-left override: reads as "fine exe.png"
        "a\u2066b",
        "zero\u200bwidth",
        "bell\x07",
        "bom\ufeff",
        "soft\u00adhyphen",  # shows nothing, breaks a search
        "tag\U000e0041s",  # tag characters: invisible
        "line\u2028separator",
    ],
)
def test_signed_text_carries_no_hidden_or_bidirectional_controls(text: str) -> None:
    """§8: a label or link that displays as something other than what it is."""
    from domain.statements import AttestationPredicate, KeyPredicate

    base = {"issuedAt": "2026-12-01T00:00:00Z", "type": "note", "body": "x"}
    validate_part(AttestationPredicate, base | {"body": "multi\r\nline\ttext, ünïcode ok é"})
    with pytest.raises(StatementError, match="control character"):
        validate_part(AttestationPredicate, base | {"body": text})
    with pytest.raises(StatementError, match="control character"):
        validate_part(
            KeyPredicate,
            {
                "issuedAt": "2026-12-01T00:00:00Z",
                "action": "revoke",
                "keyId": "sha256:" + "0" * 64,
                "publicKey": "A" * 43 + "=",
                "label": text,
            },
        )


@pytest.mark.parametrize(
    "url",
    ["https://ex.ample/\u202eevil", "https://exämple.org/", "https://a b", "https://a/\x00"],
)
def test_evidence_links_are_printable_ascii(url: str) -> None:
    from domain.statements import AttestationPredicate

    base = {"issuedAt": "2026-12-01T00:00:00Z", "type": "note", "body": "x"}
    validate_part(AttestationPredicate, base | {"evidenceUrl": "https://ex.ample/%E2%80%AE"})
    with pytest.raises(StatementError, match="printable ASCII"):
        validate_part(AttestationPredicate, base | {"evidenceUrl": url})


@pytest.mark.parametrize("value", ["1530000", True, "NaN"])
def test_rerun_numbers_are_numbers(value: Any) -> None:
    """A string or a boolean coerced into a number at admission reached the folds as it was
    signed and stopped the projector for good: numbers are strict."""
    from domain.statements import RerunPredicate

    result = _result(["passed"], True)
    result["summary"] = {"allCorrect": True, "medianNs": value, "samples": 0}
    with pytest.raises(StatementError):
        validate_part(RerunPredicate, result)
    result["summary"]["medianNs"] = 1530000  # an integer is a JSON number
    validate_part(RerunPredicate, result)
