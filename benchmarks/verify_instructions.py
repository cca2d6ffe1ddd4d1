"""``verify_bundle_lines`` alone, on a bundle already read into memory, for instruction
counts: run it under callgrind twice, with ``run`` and with ``none`` (the imports, the read
and a 50-line warm-up only); the difference is the verification's.

    PYTHONHASHSEED=0 valgrind --tool=callgrind --trace-children=yes \\
        python -m benchmarks.verify_instructions BUNDLE WORKERS run|none [BATCH_EVENTS]

With ``--dump-before=fork`` as well, each worker's file holds its own instructions alone
(callgrind dumps and zeroes the counters before each fork), and this process's files, summed,
its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ledger.verify import VerificationPolicy, bundle_lines, open_bundle, verify_bundle_lines
from ledger.verify.pool import BATCH_EVENTS


def main(bundle: Path, workers: int, run: bool, batch_events: int = BATCH_EVENTS) -> None:
    with open_bundle(bundle) as handle:
        lines = list(bundle_lines(handle))
    policy = VerificationPolicy(trust_root=None, allow_unanchored=True)
    verify_bundle_lines(lines[:50], policy, workers=1)  # the modules verifying loads on use
    if run:
        report = verify_bundle_lines(lines, policy, workers=workers, batch_events=batch_events)
        if not report.verified:
            raise SystemExit(f"{bundle} did not verify")


if __name__ == "__main__":
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else BATCH_EVENTS
    main(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "run", batch)
