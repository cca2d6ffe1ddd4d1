"""Every process must collect the same test ids: xdist's workers each collect the suite, and
when their lists differ the whole run stops before a test runs. An id spelled from a value
made at import (gzip output holds the time, a generated key is random) differs between
processes, and only when they start in different seconds, so a run on one machine may pass
and CI fail. This collects the session's own selection again in a fresh process, later and
with another hash seed, and compares the ids."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_a_second_process_collects_the_same_test_ids(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    ours = [item.nodeid for item in request.session.items]
    config = request.config
    args = [*config.invocation_params.args, "--collect-only", "-p", "tests.collected_ids"]
    if config.pluginmanager.hasplugin("xdist"):
        args += ["-n0"]
    written = tmp_path / "ids.txt"
    seed = os.environ.get("PYTHONHASHSEED", "")
    # gzip's header holds whole seconds: be sure the second collection falls in another one.
    time.sleep(1.1)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=config.invocation_params.dir,
        env={
            **os.environ,
            "KERNELINDEX_COLLECTED_IDS": str(written),
            "PYTHONHASHSEED": "1" if seed != "1" else "2",
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert written.exists(), result.stdout[-4000:] + result.stderr[-4000:]
    theirs = written.read_text("utf-8").splitlines()
    only_ours = sorted(set(ours) - set(theirs))
    only_theirs = sorted(set(theirs) - set(ours))
    assert not only_ours and not only_theirs, (
        "test ids differ between two collections; name these cases with ids=:\n"
        + "\n".join(f"- {nodeid}" for nodeid in only_ours)
        + "\n"
        + "\n".join(f"+ {nodeid}" for nodeid in only_theirs)
    )
    assert ours == theirs, "the same ids, collected in another order"
