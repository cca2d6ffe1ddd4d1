"""``python -m gpu_agent.samples sync``: refresh what the sample folders derive.

1. the public-input table in ``adv_secret_round_wrong/kernel.cu`` (from gpu_agent/inputs.py);
2. each ``solution.json``'s embedded ``sources`` (from the folder's files).

``python -m gpu_agent.samples check`` only reports what is stale (exit 1 if anything is).
"""

from __future__ import annotations

import sys

from gpu_agent.samples import (
    SECRET_SAMPLE,
    embedded_fingerprint_block,
    fingerprint_block,
    load_sample,
    sample_names,
    stale_sources,
    sync_fingerprints,
    sync_sources,
)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "check"
    if command == "sync":
        if sync_fingerprints():
            print(f"{SECRET_SAMPLE}/kernel.cu: public-input table rewritten")
        for name in sample_names():
            if sync_sources(load_sample(name)):
                print(f"{name}/solution.json: sources re-embedded")
        return 0
    if command == "check":
        stale = []
        secret = load_sample(SECRET_SAMPLE)
        kernel = (secret.folder / "kernel.cu").read_text("utf-8")
        if embedded_fingerprint_block(kernel) != fingerprint_block():
            stale.append(f"{SECRET_SAMPLE}/kernel.cu (public-input table)")
        for name in sample_names():
            stale += [f"{name}/solution.json ({path})" for path in stale_sources(load_sample(name))]
        for item in stale:
            print(f"stale: {item}")
        return 1 if stale else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
