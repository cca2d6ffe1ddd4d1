"""``verify_bundle_lines`` alone, on a bundle already read into memory, for instruction
counts: run it under callgrind twice, with ``run`` and with ``none`` (the imports, the read
and a 50-line warm-up only); the difference is the verification's.

    PYTHONHASHSEED=0 valgrind --tool=callgrind --trace-children=yes \\
        python -m benchmarks.verify_instructions BUNDLE WORKERS run|none
"""

from __future__ import annotations

import sys
from pathlib import Path

from ledger.verify import VerificationPolicy, bundle_lines, open_bundle, verify_bundle_lines


def main(bundle: Path, workers: int, run: bool) -> None:
    with open_bundle(bundle) as handle:
        lines = list(bundle_lines(handle))
    policy = VerificationPolicy(trust_root=None, allow_unanchored=True)
    verify_bundle_lines(lines[:50], policy, workers=1)  # the modules verifying loads on use
    if run:
        report = verify_bundle_lines(lines, policy, workers=workers)
        if not report.verified:
            raise SystemExit(f"{bundle} did not verify")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "run")
