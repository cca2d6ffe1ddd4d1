"""A bundle's claims (evidence level, rank) are recomputed offline from its own events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli.main import app
from ledger.aggregates import run_id

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
GROUP = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"


@pytest.fixture
def bundle(tmp_path: Path, db_url: str) -> Path:
    runner = CliRunner()
    home = tmp_path / "home"
    assert runner.invoke(app, ["demo", "--home", str(home), "--db", db_url]).exit_code == 0
    out = tmp_path / "run.jsonl"
    result = runner.invoke(
        app, ["export", "--run", SEED[7:19], "-o", str(out), "--home", str(home), "--db", db_url]
    )
    assert result.exit_code == 0, result.output
    return out


def verify(path: Path) -> tuple[int, dict[str, object]]:
    """`kernelindex verify --json`, with the exporting ledger's trust root pinned."""
    root = path.parent / "home" / "trust-root.json"
    result = CliRunner().invoke(
        app, ["verify", str(path), "--json", "--workers", "1", "--trust-root", str(root)]
    )
    return result.exit_code, json.loads(result.stdout)


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write(path: Path, items: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path


def test_run_bundle_claims_level_and_rank_and_they_verify(bundle: Path) -> None:
    claims = [r for r in records(bundle) if r["type"] == "claim"]
    seed = next(c for c in claims if c["run"] == SEED)
    assert seed["comparisonKey"] == GROUP
    assert seed["evidence"] == {"level": "reported", "policyVersion": "evidence-v2"}
    assert seed["standings"] == {"source-native": {"rank": 3, "of": 3}}
    code, report = verify(bundle)
    assert code == 0, report
    assert report["checks"]["claim"]["failed"] == 0  # type: ignore[index]
    assert report["checks"]["claim"]["passed"] >= 2  # type: ignore[index]


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (
            lambda c: c["evidence"].__setitem__("level", "verified"),
            "claims evidence level 'verified'",
        ),
        (lambda c: c["standings"].__setitem__("source-native", {"rank": 1, "of": 3}), "standing"),
        (
            lambda c: c["standings"].__setitem__("verified", {"rank": 1, "of": 1}),
            "verified standing",
        ),
        (lambda c: c.__setitem__("comparisonKey", "sha256:" + "0" * 64), "comparison group"),
    ],
)
def test_an_unsupported_claim_fails_verification(bundle: Path, tmp_path: Path, edit, words) -> None:  # type: ignore[no-untyped-def]
    items = records(bundle)
    for item in items:
        if item["type"] == "claim" and item["run"] == SEED:
            edit(item)
    code, report = verify(write(tmp_path / "edited.jsonl", items))
    assert code == 1
    reasons = [f["reason"] for f in report["findings"] if f["check"] == "claim"]  # type: ignore[union-attr]
    assert any(words in r for r in reasons), reasons


def test_a_claim_without_its_group_cannot_be_recomputed(bundle: Path, tmp_path: Path) -> None:
    # Keep only the seed's own run events: its claimed "3 of 3" no longer follows.
    seed_aggregate = str(run_id(SEED))
    kept = [
        i
        for i in records(bundle)
        if not (
            i["type"] == "event" and ":Run." in str(i["topic"]) and i["aggregate"] != seed_aggregate
        )
    ]
    for i in kept:
        if i["type"] == "footer":
            i["events"] = sum(1 for k in kept if k["type"] == "event")
    code, report = verify(write(tmp_path / "partial.jsonl", kept))
    assert code == 1
    reasons = [f["reason"] for f in report["findings"] if f["check"] == "claim"]  # type: ignore[union-attr]
    assert any("'of': 1" in r for r in reasons), reasons
