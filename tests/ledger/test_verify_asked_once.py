"""What a batch asks of each event once (``verified``, ``where``) and the report's counting
loop give what the longer roads give: held by differential properties."""

from __future__ import annotations

from collections import Counter
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from ledger.event_verification import CheckOutcome, EventVerification
from ledger.proofs.log_entries import LogEntry
from ledger.verification_report import Check, Report
from ledger.verify.events import ParsedEvent, observation_of, seen_of, verified

_CHECKS = st.sampled_from(list(Check))
_OUTCOMES = st.lists(
    st.builds(CheckOutcome, _CHECKS, st.sampled_from([True, False, None, 0, 1, ""])), max_size=12
)


@given(st.lists(st.lists(_CHECKS, max_size=12), max_size=6))
def test_ok_each_counts_as_counter_update(batches: list[list[Check]]) -> None:
    report, reference = Report(subject="x"), Counter[str]()
    for checks in batches:
        report.ok_each(checks)
        reference.update(checks)
    assert report.passed == reference
    assert type(report.passed) is Counter
    assert list(report.passed.items()) == list(reference.items())  # the same order too


def _result(outcomes: list[CheckOutcome], event: str, signer: str | None) -> EventVerification:
    result = EventVerification(position=3, version=2, event=event, signer=signer)
    result.subject_digest = "sha256:" + "0" * 64
    result.predicate = {"a": 1}
    result.checks = list(outcomes)
    return result


@given(
    _OUTCOMES,
    st.sampled_from(["Run.Ingested", "Run.Attested", "Principal.KeyRegistered"]),
    st.booleans(),
    st.booleans(),
)
def test_asked_once_equals_asked_each_time(
    outcomes: list[CheckOutcome], name: str, none: bool, included: bool
) -> None:
    result = None if none else _result(outcomes, name, "key-1")
    event = ParsedEvent(7, LogEntry(3, "a", 2, name, {}, "t"), [], UUID(int=1))
    ok = verified(result)
    assert ok is (result is not None and result.ok)
    assert seen_of(event, result, ok) == seen_of(event, result)
    if result is not None:  # the run tracker is only ever told of a verified event
        assert observation_of(result, included, ok) == observation_of(result, included)
    else:
        assert observation_of(result, included, ok) is None


def test_a_wrong_ok_would_be_seen() -> None:
    """The properties above can fail: an ``ok`` that disagrees changes the answers."""
    result = _result([CheckOutcome(Check.SIGNATURE, False)], "Run.Attested", "key-1")
    event = ParsedEvent(7, LogEntry(3, "a", 2, "Run.Attested", {}, "t"), [], UUID(int=1))
    assert seen_of(event, result, True) != seen_of(event, result)
