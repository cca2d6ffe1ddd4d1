"""Issue 34 item 8 on the real data: ``export --cohort sha256:5cd4617e`` (the prefix
``leaderboard`` takes) writes a bundle of the seed's group that ``verify`` accepts offline,
and a prefix that names no group is refused, leaving no file (it once left a 0-byte one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_ledger import RealLedger

pytestmark = pytest.mark.slow

GROUP = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"
PREFIX = GROUP[:15]  # sha256:5cd4617e, as the issue typed it


def test_export_takes_the_group_prefix_leaderboard_takes_and_leaves_no_partial_file(
    real: RealLedger, tmp_path: Path
) -> None:
    assert real.cli.json("leaderboard", PREFIX)["comparisonKey"] == GROUP
    bundle = tmp_path / "g.bundle"
    real.cli("export", "--cohort", PREFIX, "-o", bundle)
    assert bundle.stat().st_size > 0
    done = real.cli("verify", bundle, "--trust-root", real.home / "trust-root.json")
    assert done.stdout.startswith("VERIFIED"), done.stdout
    missing = tmp_path / "none.bundle"
    refused = real.cli("export", "--cohort", "sha256:ffff0000", "-o", missing, ok=False)
    assert refused.exit_code != 0 and "ffff0000" in refused.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.bundle"]
