"""Thread-CPU µs per event of verify's own steps, one process: the whole line read, ``parse_event``,
the leaf hash with the inclusion proof, and all of ``verify_bundle_lines`` at one worker (the
median of ROUNDS passes each; one JSON line).

    PYTHONHASHSEED=0 python -m benchmarks.verify_parts BUNDLE [ROUNDS]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.verification_report import Report
from ledger.verify import (
    BundleVerifier,
    VerificationPolicy,
    bundle_lines,
    open_bundle,
    verify_bundle_lines,
)
from ledger.verify import events as ev
from ledger.verify.format import OverlongLine, read_line


def main(bundle: Path, rounds: int) -> dict[str, float]:
    with open_bundle(bundle) as handle:
        lines = [line for line in bundle_lines(handle) if not isinstance(line, OverlongLine)]
    policy = VerificationPolicy(trust_root=None, allow_unanchored=True)
    verifier = BundleVerifier(policy, workers=1)
    for number, line in enumerate(lines, start=1):
        verifier.feed(number, line)
    verifier.finish()
    assert verifier.checkpoint is not None
    context = ev.EventContext((verifier.checkpoint.size, verifier.checkpoint.root), None)
    events = [line for line in lines if read_line(line).get("type") == "event"]
    n = len(events)

    def micros(fn: Callable[[], object]) -> float:
        started = time.thread_time()
        fn()
        return (time.thread_time() - started) / n * 1e6

    found: dict[str, list[float]] = {"read": [], "parse": [], "leaf+inclusion": [], "whole": []}

    def one_round() -> None:
        records: list[dict[str, Any]] = []
        found["read"].append(micros(lambda: records.extend(read_line(x) for x in events)))
        report = Report(subject="parts")
        parsed: list[ev.ParsedEvent | None] = []
        found["parse"].append(
            micros(lambda: parsed.extend(ev.parse_event("line", r, report) for r in records))
        )
        readable = [p for p in parsed if p is not None]
        found["leaf+inclusion"].append(
            micros(lambda: [ev._check_inclusion(p, context, report) for p in readable])
        )
        found["whole"].append(micros(lambda: verify_bundle_lines(lines, policy, workers=1)))
        assert not report.failed, report.findings[:3]

    for _ in range(rounds):
        one_round()
    return {k: round(statistics.median(v), 2) for k, v in found.items()} | {"events": n}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 5)))
