"""`kernelindex verify` as a user meets it: the README's own flow, the policy the caller
states, the verdicts and their exit codes (issue 13 §3–§5), and every bundle a real ledger
(a catalog sample and every source fixture) can export verifying."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import zstandard
from cli_session import Cli
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.home import LedgerHome
from ledger.verification_report import Check
from ledger.verify import (
    EXIT_CODES,
    Outcome,
    OverlongLine,
    VerificationPolicy,
    bundle_lines,
    outcome_of,
    verify_bundle_lines,
)
from ledger.verify.format import MAX_LINE_CHARS
from projections.export import export_runs

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"


@pytest.fixture
def cli(tmp_path: Path, db_url: str, seed_path: Path) -> Cli:
    """The README's flow: init, then ingest the seed manifest."""
    c = Cli(tmp_path / "home", db_url)
    c("init")
    c("ingest", seed_path)
    return c


def run(cli: Cli, *args: object, code: int) -> str:
    result = cli(*args, ok=code == 0)
    assert result.exit_code == code, result.output
    return str(result.stdout)


def test_the_readme_flow_verifies_and_unpinned_is_unanchored(cli: Cli, tmp_path: Path) -> None:
    """§5: init → ingest the seed → export --run → verify --trust-root exits 0 (it exited 1:
    the verifier ranked a run without a comparison key; the projection does not)."""
    bundle = tmp_path / "s.bundle"
    cli("export", "--run", "7e18c26c", "-o", bundle)
    root = cli.home / "trust-root.json"
    assert "VERIFIED" in run(cli, "verify", bundle, "--trust-root", root, code=0)
    claim = next(json.loads(x) for x in bundle.read_text().splitlines() if '"claim"' in x)
    assert claim["comparisonKey"] is None and claim["standings"] == {}
    # §4: nothing pinned → UNANCHORED, its own exit code; the unsafe flag says what it does.
    out = run(cli, "verify", bundle, code=EXIT_CODES[Outcome.UNANCHORED])
    assert "UNANCHORED" in out and "no trust root pinned" in out
    out = run(cli, "verify", bundle, "--unsafe-trust-bundle-root", code=0)
    assert "UNSAFE" in out
    report = json.loads(run(cli, "verify", bundle, "--json", code=4))
    assert report["outcome"] == "UNANCHORED" and report["verified"] is False


def test_a_line_longer_than_the_format_allows_fails_unread(cli: Cli, tmp_path: Path) -> None:
    """A line past the format's longest (an artifact's) is skipped in chunks, never held
    whole, and fails the format check by its line number; the lines around it still count."""
    bundle = tmp_path / "s.bundle"
    cli("export", "--run", "7e18c26c", "-o", bundle)
    lines = bundle.read_text().split("\n")
    junk = '{"type": "claim", "pad": "' + "x" * (MAX_LINE_CHARS + 10) + '"}'
    edited = tmp_path / "long.bundle"
    edited.write_text("\n".join([*lines[:3], junk, *lines[3:]]))
    root = cli.home / "trust-root.json"
    report = json.loads(
        run(cli, "verify", edited, "--trust-root", root, "--json", code=EXIT_CODES[Outcome.FAILED])
    )
    findings = [f for f in report["findings"] if f["check"] == "format"]
    assert [f["where"] for f in findings] == ["line 4"], report["findings"]
    assert "longer than any the format has" in findings[0]["reason"]
    assert report["checks"]["signature"]["passed"] > 0


@pytest.mark.parametrize("where", ["a line of its own", "inside an event's line"])
def test_bytes_that_are_not_utf8_fail_their_line_not_the_whole_read(
    cli: Cli, tmp_path: Path, where: str
) -> None:
    """A bundle is UTF-8: a byte that is not fails the format check by its line number,
    with a report (it stopped the read with a traceback and printed no report at all)."""
    bundle = tmp_path / "s.bundle"
    cli("export", "--run", "7e18c26c", "-o", bundle)
    lines = bundle.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if b'"type":"event"' in line.replace(b" ", b""))
    if where == "a line of its own":
        lines.insert(at, b"\xff\xfe")
    else:
        lines[at] = lines[at].replace(b'"', b'"\xff', 1)  # inside the first key's string
    edited = tmp_path / "bytes.bundle"
    edited.write_bytes(b"\n".join(lines))
    root = cli.home / "trust-root.json"
    report = json.loads(
        run(cli, "verify", edited, "--trust-root", root, "--json", code=EXIT_CODES[Outcome.FAILED])
    )
    assert report["outcome"] == "FAILED" and report["verified"] is False
    first = next(f for f in report["findings"] if f["check"] == "format")
    assert (first["where"], first["reason"]) == (f"line {at + 1}", "not a JSON object")
    if where == "a line of its own":  # the rest of the bundle still verifies around it
        assert len(report["findings"]) == 1, report["findings"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=40), max_size=12),
    st.integers(min_value=1, max_value=16),
    st.booleans(),
)
def test_bundle_lines_keeps_each_line_within_the_bound_and_marks_the_rest(
    lengths: list[int], bound: int, last_newline: bool
) -> None:
    text = "\n".join(chr(ord("a") + i % 26) * n for i, n in enumerate(lengths))
    text += "\n" if last_newline and lengths else ""
    expected: list[str | OverlongLine] = []
    for line in io.StringIO(text, newline="\n"):
        body = line.removesuffix("\n")
        expected.append(line if len(body) <= bound else OverlongLine(len(line)))
    assert list(bundle_lines(io.StringIO(text, newline="\n"), bound)) == expected


def test_a_stale_bundle_says_stale_until_exported_against_the_checkpoint(
    cli: Cli, tmp_path: Path
) -> None:
    bundle = tmp_path / "s.bundle"
    cli("export", "--run", "7e18c26c", "-o", bundle)
    cli("keys", "generate", tmp_path / "alice.pem")
    cli("keys", "register", tmp_path / "alice.pem", "--role", "attester", "--self")
    held = tmp_path / "held.note"
    held.write_text(cli("log", "checkpoint").stdout)
    root = cli.home / "trust-root.json"
    out = run(
        cli,
        "verify",
        bundle,
        "--trust-root",
        root,
        "--checkpoint",
        held,
        code=EXIT_CODES[Outcome.STALE],
    )
    assert "STALE" in out and "may have changed since" in out
    fresh = tmp_path / "fresh.bundle"
    cli("export", "--run", "7e18c26c", "-o", fresh, "--checkpoint", held)
    assert "VERIFIED" in run(
        cli, "verify", fresh, "--trust-root", root, "--checkpoint", held, code=0
    )
    # A checkpoint that is not this log's is refused at export, saying why.
    forged = tmp_path / "forged.note"
    forged.write_text(held.read_text().replace("\n", "\nx", 1))
    result = cli("export", "--run", "7e18c26c", "-o", fresh, "--checkpoint", forged, ok=False)
    assert "checkpoint-mismatch" in result.output


def test_the_caller_states_what_it_expects(cli: Cli, tmp_path: Path) -> None:
    bundle = tmp_path / "s.bundle"
    cli("export", "--run", "7e18c26c", "-o", bundle)
    root = cli.home / "trust-root.json"
    base = ("verify", bundle, "--trust-root", root)
    run(cli, *base, "--run", "7e18c26c", "--min-level", "reported", code=0)
    out = run(cli, *base, "--run", "7e18c26c", "--min-level", "verified", code=1)
    assert "below the verified you asked for" in out
    out = run(cli, *base, "--run", "7e18c26c", "--rank", "1", code=1)
    assert "does not prove the members of its comparison group" in out
    out = run(cli, *base, "--run", "ffffffff", code=1)
    assert "holds no such run" in out
    result = cli(*base, "--rank", "1", ok=False)
    assert result.exit_code == 2 and "give --run too" in result.output


def test_verify_help_lists_every_check_and_exit_code(cli: Cli) -> None:
    text = " ".join(cli("verify", "--help").stdout.split())
    for check in Check:
        assert str(check) in text, check
    for outcome, code in EXIT_CODES.items():
        assert f"{outcome} {code}" in text
    # docs/verification.md names them too: tests/docs/test_docs_reference.py holds that.


# ------------------------------------------------------------- every bundle of a real ledger


def _catalog_sample(shared: Path, tmp_path: Path, runs: int) -> Path:
    path = shared / "fixtures/kernelindex-catalog/catalog-2026-08-16-0022af0b.jsonl.zst"
    lines: list[bytes] = []
    taken = 0
    with path.open("rb") as raw:
        for line in io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw)):
            if json.loads(line)["table"] == "benchmark_runs":
                if taken >= runs:
                    continue
                taken += 1
            lines.append(line)
    sample = tmp_path / "catalog-sample.jsonl"
    sample.write_bytes(b"".join(lines))
    return sample


def _import_everything(cli: Cli, shared: Path, catalog: Path) -> None:
    cli("import", "kernelindex-catalog", catalog)
    fixtures = shared / "fixtures"
    cli("import", "sol-leaderboard", fixtures / "sol-leaderboard")
    for folder in sorted((fixtures / "sol-execbench").iterdir()):
        if folder.is_dir() and (folder / "definition.json").exists():
            cli("import", "sol-execbench", folder)
    cli("import", "flashinfer-trace", fixtures / "flashinfer-trace")
    cli("import", "gpumode", fixtures / "gpumode" / "fp8-mm-top.json")


def _verify_every_run(cli: Cli, limit: int | None = None) -> int:
    ledger = LedgerHome.at(cli.home, cli.db_url).open()
    policy = VerificationPolicy(trust_root=ledger.trust_root)
    digests = sorted({d for d, _ in ledger.run_index()})[:limit]
    assert SEED in {d for d, _ in ledger.run_index()}
    for digest in digests:
        out = io.StringIO()
        export_runs(ledger, out, [digest])
        report = verify_bundle_lines(out.getvalue().splitlines(), policy, workers=1)
        assert outcome_of(report) is Outcome.VERIFIED, (digest, report.findings[:5])
    whole = io.StringIO()
    export_runs(ledger, whole, None)
    report = verify_bundle_lines(whole.getvalue().splitlines(), policy, workers=1)
    assert outcome_of(report) is Outcome.VERIFIED, report.findings[:5]
    return len(digests)


def test_every_run_of_a_catalog_sample_and_every_source_fixture_verifies(
    cli: Cli, shared: Path, tmp_path: Path
) -> None:
    _import_everything(cli, shared, _catalog_sample(shared, tmp_path, 60))
    assert _verify_every_run(cli) > 60


@pytest.mark.slow
def test_the_whole_catalog_and_every_source_fixture_verify(
    cli: Cli, shared: Path, tmp_path: Path
) -> None:
    """The whole catalog: a whole-log bundle, and the bundles of 400 runs."""
    catalog = shared / "fixtures/kernelindex-catalog/catalog-2026-08-16-0022af0b.jsonl.zst"
    _import_everything(cli, shared, catalog)
    assert _verify_every_run(cli, limit=400) == 400
