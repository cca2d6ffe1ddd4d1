"""check_stateless per envelope, cold ingestions (issue 36): thread-CPU µs per envelope, or a
profile / an instruction count of the same loop.

    python -m benchmarks.prof_checks --envelopes 300            # thread-CPU µs per envelope
    python -m benchmarks.prof_checks --envelopes 300 --profile  # cProfile, top functions
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.out \\
        --zero-before=getsid --dump-before=getpgid \\
        python benchmarks/prof_checks.py --envelopes 300 --no-signature --instructions
    grep summary cg.out.1                                      # the loop alone; ÷ envelopes

``--instructions``: one pass of the loop, memo cold, between two markers (``os.getsid``
before, ``os.getpgid`` after) that callgrind's ``--zero-before``/``--dump-before`` cut at,
so its second file counts the loop alone. Run as a file (``python benchmarks/...``) with
``PYTHONPATH`` naming another checkout, it measures that checkout's code on the same cached
envelopes (the cache lies beside this file).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import time
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from benchmarks.bench_ingest import signed_ingestions, warm_shared_manifests
from ledger.admission_checks import check_stateless
from ledger.signing.keys import SigningKey

CACHE = Path(__file__).resolve().parent / ".cache"


def prepared(count: int) -> tuple[list[dict[str, object]], SigningKey]:
    """``count`` signed ingestions (cached on disk: signing is not what is measured)."""
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"prof_checks_{count}.json"
    if path.exists():
        cached = json.loads(path.read_bytes())
        private = serialization.load_pem_private_key(cached["pem"].encode(), None)
        assert isinstance(private, Ed25519PrivateKey)
        return cached["envelopes"], SigningKey(private)
    key = SigningKey.generate()
    envelopes = signed_ingestions(key, count)
    path.write_text(json.dumps({"envelopes": envelopes, "pem": key.to_pem().decode()}))
    return envelopes, key


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--envelopes", type=int, default=300)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--no-signature", action="store_true", help="no key: no Ed25519")
    parser.add_argument("--skip-loop", action="store_true", help="preparation only")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--instructions", action="store_true", help="one pass between markers")
    args = parser.parse_args()
    envelopes, key = prepared(args.envelopes)
    public = key.public
    key_of = None if args.no_signature else (lambda _id: public)
    # Warm the imports and the models with an envelope that is not measured.
    check_stateless(signed_ingestions(key, 1, first=10_000_000)[0], key_of)
    if args.skip_loop:
        warm_shared_manifests(len(envelopes))
        return
    if args.instructions:
        warm_shared_manifests(len(envelopes))
        os.getsid(0)  # callgrind --zero-before=getsid
        for raw in envelopes:
            check_stateless(raw, key_of)
        os.getpgid(0)  # callgrind --dump-before=getpgid
        return
    best = float("inf")
    for _ in range(args.repeat):
        warm_shared_manifests(len(envelopes))
        profiler = cProfile.Profile() if args.profile else None
        start = time.thread_time()
        if profiler is not None:
            profiler.enable()
        for raw in envelopes:
            checked = check_stateless(raw, key_of)
            assert checked.refusal() is None and not isinstance(checked.run, Exception)
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler).sort_stats(args.sort).print_stats(30)
            return
        best = min(best, (time.thread_time() - start) / len(envelopes) * 1e6)
    print(f"check_stateless: {best:.1f} µs thread-CPU per envelope (best of {args.repeat})")


if __name__ == "__main__":
    main()
