"""An event verifies only where each of its checks passed with a true ``ok``: a check whose
outcome is anything else (a Struct does not check the type of ``ok`` when made) counts as
failed, in the event's verdict and in the report it counts into."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.event_verification import CheckOutcome, EventVerification
from ledger.verification_report import Check, Report


@pytest.mark.parametrize("odd", [None, "", 0, False])
def test_a_check_without_a_true_ok_fails_the_event(odd: Any) -> None:
    event = EventVerification(position=1, version=1, event="Run.Attested")
    event.check(Check.SIGNATURE)
    event.checks.append(CheckOutcome(Check.PREDICATE, odd, "odd"))
    report = Report(subject="a bundle")
    event.report_to(report, "event 1")
    assert event.ok is False
    assert report.failed[Check.PREDICATE] == 1 and report.passed[Check.SIGNATURE] == 1
    assert not report.verified


def test_an_event_with_every_check_true_verifies() -> None:
    event = EventVerification(position=1, version=1, event="Run.Attested")
    event.check(Check.SIGNATURE)
    event.check(Check.PREDICATE)
    report = Report(subject="a bundle")
    event.report_to(report, "event 1")
    assert event.ok is True and report.verified
    assert report.passed[Check.SIGNATURE] == report.passed[Check.PREDICATE] == 1


def test_an_event_with_no_checks_does_not_verify() -> None:
    assert EventVerification(position=1, version=1, event="Run.Attested").ok is False


@pytest.mark.parametrize("name", list(Check))
def test_a_held_check_is_the_outcome_check_makes(name: Check) -> None:
    """A check that held is recorded as one shared outcome per name (``held``, and ``check``
    with ``ok`` true and no detail): equal to the outcome made anew, so reports, history and
    pickles see the same values; a failed check or one with a detail keeps its own."""
    event = EventVerification(position=1, version=1, event="Run.Attested")
    event.check(name)
    event.held(name)
    event.check(name, True, "why")
    event.check(name, False, "why not")
    assert event.checks == [
        CheckOutcome(name, True, ""),
        CheckOutcome(name, True, ""),
        CheckOutcome(name, True, "why"),
        CheckOutcome(name, False, "why not"),
    ]
    assert event.failures == [CheckOutcome(name, False, "why not")]
