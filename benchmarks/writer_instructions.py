"""The writer process's own work per ingestion, in instructions (callgrind: load-independent),
and the worker's encoding of what it sends the writer (``ledger.checked_wire``).

Signing and the worker's checks are slow under valgrind, so they are made first, natively:

    python -m benchmarks.writer_instructions prep /tmp/wi --count 320
    PYTHONHASHSEED=0 valgrind --tool=callgrind --zero-before=getsid --dump-before=getpgid \\
        python -m benchmarks.writer_instructions run /tmp/wi      # or: encode /tmp/wi
    grep summary callgrind.out.*.1                                # instructions, timed part

``prep``: a ledger home with 64 ingestions, then ``--count`` more signed and checked as a
server's worker checks them (``check_stateless`` with the key book, the manifest memo cold),
the checked envelopes and their encoded requests saved. ``run``: a copy of that home opened
as the writer process opens it (witnessing, the heap settled as its own:
``ledger.long_lived.settle_heap``), then each group of 32 requests
decoded, ``commit_group`` and its answers pickled, as ``_Serving`` does. ``encode``: the
checked envelopes encoded as a worker sends them. Only the timed part runs between
``os.getsid`` and ``os.getpgid``, which nothing else here calls: callgrind counts from the
first and dumps at the second. Thread-CPU per envelope is printed too (meaningless under
valgrind; natively, a figure for a quiet machine).
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import time
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

from benchmarks.bench_ingest import signed_ingestions, warm_shared_manifests
from ledger.admission_checks import KnownKeys, check_stateless
from ledger.application import Ledger
from ledger.checked_wire import decode_request, encode_request
from ledger.group_commit import commit_group
from ledger.home import LedgerHome
from ledger.long_lived import settle_heap
from ledger.writer_process import _answer

GROUP = 32
WARM = 64


def _home(folder: Path) -> LedgerHome:
    return LedgerHome.at(folder, f"sqlite:///{folder / 'ledger.db'}")


def warmed_home(folder: Path, count: int, origin: str) -> tuple[Ledger, list[dict[str, Any]]]:
    """A new ledger home at ``folder / "home"`` holding ``WARM`` ingestions, and ``count``
    more signed by its ingester, not appended (the timed part's)."""
    shutil.rmtree(folder, ignore_errors=True)
    home = _home(folder / "home")
    ledger = home.initialise(origin=origin)
    envelopes = signed_ingestions(home.key("ingester"), count + WARM)
    for raw in envelopes[:WARM]:
        ledger.append(raw)
    return ledger, envelopes[WARM:]


def work_copy(folder: Path) -> LedgerHome:
    """A fresh copy of ``folder / "home"`` at ``folder / "work"``: each run starts alike."""
    work = folder / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(folder / "home", work)
    return _home(work)


def prep(folder: Path, count: int) -> None:
    ledger, envelopes = warmed_home(folder, count, "bench.kernelindex/writer-instructions")
    keys = KnownKeys(ledger.key_states)
    warm_shared_manifests(len(envelopes) + WARM)  # a server's memo: cold but for shared ones
    checked = [check_stateless(raw, keys) for raw in envelopes]
    ledger.close()
    (folder / "checked.pickle").write_bytes(pickle.dumps(checked))
    requests = [encode_request(n, c) for n, c in enumerate(checked)]
    (folder / "requests.pickle").write_bytes(pickle.dumps(requests))


def encode(folder: Path) -> None:
    checked = pickle.loads((folder / "checked.pickle").read_bytes())  # noqa: S301 - ours
    started = time.thread_time()
    os.getsid(0)
    for number, item in enumerate(checked):
        encode_request(number, item)
    os.getpgid(0)
    print(f"{(time.thread_time() - started) / len(checked) * 1e6:.1f} µs thread-CPU each")


def run(folder: Path) -> None:
    ledger = work_copy(folder).open(witnessing=True)
    requests: list[bytes] = pickle.loads((folder / "requests.pickle").read_bytes())  # noqa: S301
    settle_heap()  # as the writer process does before it serves
    started = time.thread_time()
    os.getsid(0)
    for first in range(0, len(requests), GROUP):
        group = [decode_request(body) for body in requests[first : first + GROUP]]
        pairs = [message for message in group if isinstance(message, tuple)]
        results = commit_group(ledger, [item for _, item in pairs])
        ForkingPickler.dumps([(n, *_answer(r)) for (n, _), r in zip(pairs, results, strict=True)])
        refused = [r for r in results if isinstance(r, BaseException)]
        if refused:
            raise SystemExit(f"the writer refused {refused[0]!r}")
    os.getpgid(0)
    print(f"{(time.thread_time() - started) / len(requests) * 1e6:.1f} µs thread-CPU each")
    ledger.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["prep", "encode", "run"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--count", type=int, default=320)
    args = parser.parse_args(argv)
    if args.step == "prep":
        prep(args.folder, args.count)
    elif args.step == "encode":
        encode(args.folder)
    else:
        run(args.folder)


if __name__ == "__main__":
    main()
