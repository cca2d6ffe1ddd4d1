"""The self-check's verdicts: did the harness treat each sample as ``SAMPLES`` says it must?

Split from ``gpu_agent/selfcheck.py``, which runs the samples and documents the rules: an
honest sample passes every case; an adversarial one is refused by the check it names, in the
rounds it names; the refill sample (``caught_by="refill"``) passes every case and is then
shown, by :func:`check_neutralised`, to have been timed working. Pure functions over result
records and reports; nothing here touches a device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpu_agent.backends.selfcheck_table import SampleReport
from gpu_agent.samples import SampleInfo

# A cheat is neutralised when the harness timed it working: well above its idle time.
NEUTRALISED_RATIO = 1.5

# What a refusal by each check looks like in a harness case record (the rerun vocabulary).
_REASON_MARKERS = {
    "poison": "unwritten-output",
    "mutation": "input-mutation",
    "tolerance": "output-mismatch",
}


def _refusal_check(info: SampleInfo, record: Mapping[str, Any]) -> str | None:
    """Which check refused the case (``poison``...), or None if it passed."""
    status, reason = record["status"], str(record.get("reason", ""))
    if status == "passed":
        return None
    if status == "impossible_time":
        return "floor"
    if status == "incorrect":
        for check, marker in _REASON_MARKERS.items():
            if marker == reason:
                return check
    return f"{status}: {reason[:200]}"


def judge(info: SampleInfo, result: Mapping[str, Any]) -> tuple[bool, str]:
    """Did the harness treat this sample as it must? ``(ok, explanation)``."""
    cases = result["cases"]
    if info.honest:
        failed = [c for c in cases if c["status"] != "passed"]
        if failed:
            first = failed[0]
            return False, f"honest sample refused: {first['status']}: {first.get('reason', '')}"
        return True, "all cases passed"
    if info.caught_by == "refill":
        return _judge_refill(cases)
    verdicts = [(_refusal_check(info, c), c) for c in cases]
    caught = [(check, c) for check, c in verdicts if check is not None]
    if not caught:
        return False, f"NOT CAUGHT: every case passed (expected the {info.caught_by} check)"
    wrong = [(check, c) for check, c in caught if check != info.caught_by]
    if wrong:
        check, case = wrong[0]
        return False, f"caught, but by {check!r} instead of {info.caught_by!r} ({case['case']})"
    if info.rounds:
        labels = ("secret", "post-timing")
        wanted = {
            label for label, r in zip(labels, ("secret", "post"), strict=True) if r in info.rounds
        }
        off = [c for _, c in caught if c.get("round") not in wanted]
        if off:
            return False, f"caught in the wrong round: {off[0].get('round')}"
    return True, f"caught by the {info.caught_by} check in {len(caught)}/{len(cases)} case(s)"


# The refill sample's verdict until an unrefilled timing shows it was timed working.
NEUTRALISE_PENDING = "every case passed; neutralised only if timed working"


def _judge_refill(cases: Sequence[Mapping[str, Any]]) -> tuple[bool, str]:
    """A cheat the refill neutralises must pass everywhere (then :func:`check_neutralised`
    decides); refused by a check instead, it was not neutralised."""
    failed = [c for c in cases if c["status"] != "passed"]
    if not failed:
        return False, NEUTRALISE_PENDING
    first = failed[0]
    return False, (
        f"not neutralised by the refill: {first['status']}: {str(first.get('reason', ''))[:200]}"
    )


def check_neutralised(report: SampleReport) -> None:
    """A cheat that passed every case is fine if it was timed *working*: each median at least
    NEUTRALISED_RATIO × an unrefilled timing of it (in which it idles)."""
    ratios = [r.ratio for r in report.rows]
    low = min((q for q in ratios if q is not None), default=0.0)
    if report.rows and None not in ratios and low >= NEUTRALISED_RATIO:
        report.ok = True
        report.verdict = (
            f"neutralised: refilled timed launches made it compute (medians {low:.1f}× or "
            "more its unrefilled timing)"
        )
    else:
        report.verdict += f"; nor neutralised (medians only {low:.2f}× its unrefilled timing)"
