"""Files a command writes are whole or absent (issue 34 item 8): ``export``, ``artifact get
-o`` and ``keys generate`` write under a temporary name beside the target and rename it
once complete; a refusal leaves no file, and never damages the one that was there. And
``export`` names a group as ``leaderboard`` does: by a unique prefix too. On SQLite and
PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_session import Cli

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
GROUP = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"


@pytest.fixture
def cli(tmp_path: Path, db_url: str) -> Cli:
    cli = Cli(tmp_path / "home", db_url)
    cli("demo", "--home", cli.home, "--db", db_url)
    return cli


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


def test_export_takes_the_group_prefix_leaderboard_takes(cli: Cli, out: Path) -> None:
    shown = json.loads(cli("leaderboard", GROUP[:15], "--json").stdout)
    assert shown["comparisonKey"] == GROUP
    bundle = out / "g.bundle"
    done = cli("export", "--cohort", GROUP[:15], "-o", bundle)
    assert f"wrote {bundle}: " in done.stderr
    header = json.loads(bundle.read_text("utf-8").splitlines()[0])
    assert header["scope"]["groups"] == [GROUP]
    assert sorted(p.name for p in out.iterdir()) == ["g.bundle"]  # nothing else left
    root = cli.home / "trust-root.json"
    assert cli("verify", bundle, "--trust-root", root).stdout.startswith("VERIFIED")


def test_a_refused_export_leaves_no_file_and_keeps_the_one_there(cli: Cli, out: Path) -> None:
    # Refused before anything is written: no group has that prefix.
    refused = cli("export", "--cohort", "sha256:ffff0000", "-o", out / "g.bundle", ok=False)
    assert refused.exit_code == 1 and "error[not-found]" in refused.stderr
    assert list(out.iterdir()) == []
    # Refused once the bundle is begun: a checkpoint size the log has not reached.
    late = cli("export", "--run", SEED[:15], "--size", "100000", "-o", out / "r.bundle", ok=False)
    assert late.exit_code == 1 and "100000 leaves" in late.stderr
    assert list(out.iterdir()) == []
    # The same refusal over a bundle the user holds: it is left as it was.
    held = out / "r.bundle"
    cli("export", "--run", SEED[:15], "-o", held)
    before = held.read_bytes()
    cli("export", "--run", SEED[:15], "--size", "100000", "-o", held, ok=False)
    assert held.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["r.bundle"]


def test_artifact_get_writes_the_file_whole_or_not_at_all(
    cli: Cli, out: Path, shared: Path
) -> None:
    cli("import", "sol-leaderboard", shared / "fixtures/sol-leaderboard")  # keeps its records
    boards = json.loads(cli("leaderboard", "--gpu", "NVIDIA B200", "--json").stdout)["groups"]
    runs = [e["run"] for board in boards for e in board["entries"]]
    stored = [
        a["digest"]
        for run in runs
        for a in json.loads(cli("show", run, "--json").stdout)["artifacts"]
        if a["stored"]
    ]
    snapshot = stored[0]
    kept = out / "snapshot.json"
    cli("artifact", "get", snapshot, "-o", kept)
    assert kept.read_bytes() == cli("artifact", "get", snapshot).stdout_bytes
    missing = cli("artifact", "get", "sha256:" + "0" * 64, "-o", out / "none", ok=False)
    assert missing.exit_code == 1
    assert sorted(p.name for p in out.iterdir()) == ["snapshot.json"]


def test_keys_generate_never_replaces_a_key(cli: Cli, out: Path) -> None:
    key = out / "alice.pem"
    made = json.loads(cli("keys", "generate", key, "--json").stdout)
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    pem, public = key.read_bytes(), (out / "alice.pem.pub").read_bytes()
    again = cli("keys", "generate", key, ok=False)
    assert "refusing to overwrite a key" in again.stderr
    assert (key.read_bytes(), (out / "alice.pem.pub").read_bytes()) == (pem, public)
    assert sorted(p.name for p in out.iterdir()) == ["alice.pem", "alice.pem.pub"]
    assert made["keyId"].startswith("sha256:")
