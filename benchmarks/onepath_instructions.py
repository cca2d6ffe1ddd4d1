"""One-process ingestion's own work per envelope, in instructions (callgrind: load-independent):
``Ledger.append_many`` of the JSON values received, groups of 32, the manifest memo cold but
for the manifests every run shares (as ``bench_ingest``'s one-process figure).

Signing is slow under valgrind, so it is done first, natively:

    python -m benchmarks.onepath_instructions prep /tmp/op --count 320
    PYTHONHASHSEED=0 valgrind --tool=callgrind --zero-before=getsid --dump-before=getpgid \\
        python -m benchmarks.onepath_instructions run /tmp/op
    grep summary callgrind.out.*.1                                # instructions, timed part

``prep``: a ledger home with 64 ingestions, then ``--count`` more signed and saved as JSON.
``run``: a copy of that home opened, the envelopes read back (JSON values, as received), the
memo emptied but for the shared manifests, then ``append_many`` in groups of 32 between
``os.getsid`` and ``os.getpgid``, which nothing else here calls: callgrind counts from the
first and dumps at the second. Thread-CPU per envelope is printed too (meaningless under
valgrind; natively, a figure for a quiet machine).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from benchmarks.bench_ingest import warm_shared_manifests
from benchmarks.writer_instructions import GROUP, warmed_home, work_copy
from ledger.long_lived import freeze_long_lived


def prep(folder: Path, count: int) -> None:
    ledger, envelopes = warmed_home(folder, count, "bench.kernelindex/onepath-instructions")
    ledger.close()
    (folder / "envelopes.json").write_text(json.dumps(envelopes))


def run(folder: Path) -> None:
    ledger = work_copy(folder).open()
    envelopes = json.loads((folder / "envelopes.json").read_text())
    warm_shared_manifests(len(envelopes))
    freeze_long_lived()
    started = time.thread_time()
    os.getsid(0)
    for first in range(0, len(envelopes), GROUP):
        results = ledger.append_many(envelopes[first : first + GROUP])
        refused = [r for r in results if isinstance(r, BaseException)]
        if refused:
            raise SystemExit(f"append_many refused {refused[0]!r}")
    os.getpgid(0)
    print(f"{(time.thread_time() - started) / len(envelopes) * 1e6:.1f} µs thread-CPU each")
    ledger.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["prep", "run"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--count", type=int, default=320)
    args = parser.parse_args(argv)
    if args.step == "prep":
        prep(args.folder, args.count)
    else:
        run(args.folder)


if __name__ == "__main__":
    main()
