"""Heads under witnesses, end to end on SQLite and PostgreSQL: a ledger with heads leaves ends
every commit's tree with the root of its heads map, witnesses cosign that tree, and
``verify --policy`` holds a scoped bundle's signed heads to it. An operator who shows two
users two different heads for one (honestly cosigned) checkpoint is caught by ``heads-map``."""

from __future__ import annotations

import base64
import copy
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from typer.testing import CliRunner

from api.cli.main import app
from domain.statements import Role
from ledger.application import Ledger
from ledger.audit import audit_ledger
from ledger.bundle import export_bundle
from ledger.ids import run_id
from ledger.proofs.hasher import leaf_hash
from ledger.proofs.heads import Head, Heads, open_heads, sign_heads
from ledger.proofs.heads_map import heads_leaf_data
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.store.heads_leaves import heads_at
from ledger.store.transparency_log import leaves
from ledger.verification_report import Check, Report
from ledger.verify import Outcome, VerificationPolicy, outcome_of, verify_bundle_lines
from ledger.witness.policy import Policy, parse_policy
from projections.export import export_runs
from projections.runner import ProjectionRunner
from tests.projections.projection_world import GROUP, MANIFESTS, NAMES, RUN_21613, SEED
from tests.witness.ledger_witnesses import (
    LocalWitness,
    Operator,
    all_serving,
    follows,
    local_witnesses,
)


@dataclass
class World:
    operator: Operator
    ledger: Ledger
    seed: str  # the seed run's digest: ingested, then attested twice
    other: str  # a second run of the same comparison group
    group: str
    policy: Policy
    policy_text: str


def _policy_text(witnesses: list[LocalWitness]) -> str:
    lines = [f"witness {w.name} {w.vkey}" for w in witnesses]
    names = " ".join(w.name for w in witnesses)
    return "\n".join([*lines, f"group all 2 {names}", "quorum all"]) + "\n"


@pytest.fixture
def world(db_url: str, tmp_path: Path) -> Iterator[World]:
    operator = Operator.make()
    three = local_witnesses(tmp_path / "witnesses", 3)
    with all_serving(three, [follows(operator.root)]):
        ledger = Ledger(db_url, operator.root, log_key=operator.log)
        ledger.tlog.enable_heads_leaf()
        ingester, attester = SigningKey.generate(), SigningKey.generate()
        admin = operator.admin
        ledger.append_many(
            [
                key_registration_envelope(admin.public, [Role.ADMIN], admin),
                key_registration_envelope(ingester.public, [Role.INGESTER], admin),
                key_registration_envelope(attester.public, [Role.ATTESTER], admin),
            ]
        )
        seed = ledger.append(ingestion_envelope(MANIFESTS[SEED], ingester)).subject_digest
        for body in ("first note", "second note"):
            ledger.append(
                attestation_envelope(seed, NAMES[SEED], attester, type_="note", body=body)
            )
        second = ledger.append(ingestion_envelope(MANIFESTS[RUN_21613], ingester)).subject_digest
        assert (seed, second) == (SEED, RUN_21613)
        witnessing = ledger.start_witnessing([w.endpoint for w in three], poll=3600)
        assert [o and o.outcome for o in witnessing.round()] == ["cosigned"] * 3
        witnessing.close()
        text = _policy_text(three)
        yield World(operator, ledger, seed, second, GROUP, parse_policy(text), text)
        ledger.close()


def register(ledger: Ledger, admin: SigningKey) -> None:
    newcomer = SigningKey.generate()
    ledger.append(key_registration_envelope(newcomer.public, [Role.ATTESTER], admin))


def bundle(w: World) -> list[dict[str, Any]]:
    out = io.StringIO()
    export_bundle(w.ledger, out, runs=[w.seed], groups=[w.group])
    return [json.loads(line) for line in out.getvalue().splitlines()]


def verify(w: World, records: list[dict[str, Any]]) -> Report:
    lines = [json.dumps(r) + "\n" for r in records]
    policy = VerificationPolicy(trust_root=w.operator.root, witness_policy=w.policy)
    return verify_bundle_lines(lines, policy, workers=1)


def line(records: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [r for r in records if r["type"] == kind]
    return found


def test_every_commit_ends_with_the_heads_leaf_of_the_tree_before_it(world: World) -> None:
    """Each stored checkpoint's last leaf is a heads leaf (position -size) whose map root is
    recomputed from the tables; a second ledger object (another writer, which learns from
    the table that the log has heads leaves) keeps it so, and the first, whose map is then
    stale, rebuilds it."""
    url = world.ledger.store.engine.url.render_as_string(hide_password=False)
    again = Ledger(url, world.operator.root, log_key=world.operator.log)
    try:
        register(again, world.operator.admin)
        register(world.ledger, world.operator.admin)
        with again.store.transaction(commit=False) as session:
            sizes = [c.size for c in again.tlog.checkpoints(session)]
            rows = session.execute(
                select(leaves.c.leaf_index, leaves.c.position, leaves.c.leaf_hash)
            )
            stored = {int(i): (int(p), bytes(h)) for i, p, h in rows}
            roots = {s: heads_at(session, again.store.events, s - 1).map.root() for s in sizes}
    finally:
        again.close()
    assert len(sizes) == 7 and sizes[-1] == len(stored)  # 3 keys in one commit, then 6 more
    origin = world.operator.root.origin
    for size in sizes:
        position, digest = stored[size - 1]
        assert position == -size
        assert digest == leaf_hash(heads_leaf_data(origin, size - 1, roots[size]))
    events = sorted(p for p, _ in stored.values() if p > 0)
    assert events == list(range(1, len(events) + 1)) and len(events) == len(stored) - len(sizes)


def test_a_scoped_bundle_reports_its_heads_as_witnessed(world: World) -> None:
    records = bundle(world)
    report = verify(world, records)
    assert outcome_of(report) is Outcome.VERIFIED, report.findings
    mapped = line(records, "headsMap")
    # One proof a run (the seed, and the other member of its group), key and group, each held.
    proved = len(mapped["runs"]) + len(mapped["keys"]) + len(mapped["groups"])
    assert report.passed[Check.HEADS_MAP] == proved == 2 + 3 + 1
    assert report.facts["heads"].startswith("witnessed: ")
    assert sorted(mapped["runs"]) == sorted([world.seed, world.other])
    assert list(mapped["groups"]) == [world.group]


def _second_heads(w: World, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The operator's other bundle for the same checkpoint: the seed run's last event left
    out, and heads signed by the log key that say it has one event fewer."""
    heads = open_heads(line(records, "heads")["note"], _verifier(w))
    seed_events = [
        r for r in records if r["type"] == "event" and r["aggregate"] == str(run_id(w.seed))
    ]
    dropped, kept = seed_events[-1], seed_events[-2]
    runs = dict(heads.runs)
    runs[w.seed] = Head(heads.runs[w.seed].events - 1, kept["leafIndex"])
    lie = Heads(heads.origin, heads.size, heads.root, runs, heads.keys, heads.groups)
    note = sign_heads(lie, w.operator.log.private_key())
    out = [r for r in records if r is not dropped]
    for r in out:
        if r["type"] == "heads":
            r["note"] = note
        if r["type"] == "footer":
            r["events"] -= 1
    return out


def _verifier(w: World) -> Any:
    from ledger.proofs.signed_note import Verifier

    return Verifier.from_public_key(w.operator.root.origin, w.operator.root.log_key.raw)


def test_two_heads_for_one_cosigned_checkpoint_are_caught_by_heads_map(world: World) -> None:
    """One operator, one checkpoint the quorum cosigned, two sets of heads signed by the log
    key: the honest bundle verifies; the one whose heads leave out the seed run's last
    attestation fails ``heads-map`` (not ``witnessed``: it is the same checkpoint)."""
    honest = bundle(world)
    other = _second_heads(world, copy.deepcopy(honest))
    assert line(other, "checkpoint") == line(honest, "checkpoint")
    report = verify(world, other)
    assert outcome_of(report) is Outcome.FAILED
    assert report.passed[Check.WITNESSED] == 1 and not report.failed.get(Check.WITNESSED)
    assert {f.check for f in report.findings} == {Check.HEADS_MAP}
    (finding,) = report.findings
    assert finding.where == f"run {world.seed}"
    assert "other heads for this checkpoint" in finding.reason
    assert report.facts["heads"].startswith("refuted")


def test_heads_without_their_map_are_reported_as_the_log_keys_word(world: World) -> None:
    """The lie with the headsMap line dropped: nothing in the bundle refutes it, and the
    report says the heads are only the log key's word (not witnessed)."""
    other = [r for r in _second_heads(world, bundle(world)) if r["type"] != "headsMap"]
    report = verify(world, other)
    assert report.facts["heads"].startswith("the log key's word")
    assert not report.passed.get(Check.HEADS_MAP)


def test_a_forged_map_proof_does_not_lead_to_the_witnessed_leaf(world: World) -> None:
    records = bundle(world)
    mapped = line(records, "headsMap")
    proof = mapped["runs"][world.seed]
    first = base64.b64decode(proof["siblings"][0])
    proof["siblings"][0] = base64.b64encode(bytes([first[0] ^ 1]) + first[1:]).decode()
    report = verify(world, records)
    assert outcome_of(report) is Outcome.FAILED
    assert [(f.check, f.where) for f in report.findings] == [(Check.HEADS_MAP, f"run {world.seed}")]
    mapped["root"] = base64.b64encode(bytes(32)).decode()
    report = verify(world, records)
    assert [f.check for f in report.findings] == [Check.HEADS_MAP]
    assert "the heads leaf is not in the tree" in report.findings[0].reason


def test_a_whole_log_bundle_holds_the_heads_leaves_as_the_leaves_they_are(world: World) -> None:
    out = io.StringIO()
    export_bundle(world.ledger, out)
    records = [json.loads(text) for text in out.getvalue().splitlines()]
    report = verify(world, records)
    assert outcome_of(report) is Outcome.VERIFIED, report.findings
    heads_leaves = [r["leafIndex"] for r in records if r["type"] == "headsLeaf"]
    assert heads_leaves == [3, 5, 7, 9, 11]  # one a commit, each after its events
    assert report.facts["scope"] == {"all": True}
    dropped = [r for r in records if not (r["type"] == "headsLeaf" and r["leafIndex"] == 7)]
    report = verify(world, dropped)
    assert [(f.check, f.where) for f in report.findings] == [(Check.COMPLETE, "end")]


def test_a_ledger_without_heads_leaves_keeps_its_bundles_and_their_verdicts(
    db_url: str,
) -> None:
    """Heads leaves are off unless asked for: the tree holds the events alone, a scoped
    bundle has no headsMap line, verifies as before, and its heads are the log key's word."""
    operator = Operator.make()
    ledger = Ledger(db_url, operator.root, log_key=operator.log)
    try:
        ingester = SigningKey.generate()
        admin = operator.admin
        ledger.append_many(
            [
                key_registration_envelope(admin.public, [Role.ADMIN], admin),
                key_registration_envelope(ingester.public, [Role.INGESTER], admin),
            ]
        )
        ledger.append(ingestion_envelope(MANIFESTS[SEED], ingester))
        assert ledger.tlog.checkpoint().size == 3
        out = io.StringIO()
        export_bundle(ledger, out, runs=[SEED])
    finally:
        ledger.close()
    records = [json.loads(text) for text in out.getvalue().splitlines()]
    assert [r for r in records if r["type"].startswith("headsM")] == []
    policy = VerificationPolicy(trust_root=operator.root)
    report = verify_bundle_lines([json.dumps(r) for r in records], policy, workers=1)
    assert outcome_of(report) is Outcome.VERIFIED, report.findings
    assert report.facts["heads"].startswith("the log key's word")


def test_kernelindex_export_bundles_at_a_size_that_ends_with_the_heads_leaf(
    world: World,
) -> None:
    """``kernelindex export`` bundles as of the views' position: the size taken in is its
    commit's, heads leaf included, so the bundle (with its claims) carries the heads map."""
    ProjectionRunner(world.ledger).catch_up()
    out = io.StringIO()
    summary = export_runs(world.ledger, out, [world.seed])
    records = [json.loads(text) for text in out.getvalue().splitlines()]
    assert summary.tree_size == world.ledger.tlog.checkpoint().size
    assert line(records, "headsMap")["leafIndex"] == summary.tree_size - 1
    assert [r["run"] for r in records if r["type"] == "claim"] == [world.seed]
    report = verify(world, records)
    assert outcome_of(report) is Outcome.VERIFIED, report.findings
    assert report.facts["heads"].startswith("witnessed: ")


def test_a_caller_who_requires_witnessed_heads_fails_heads_without_their_map(
    world: World,
) -> None:
    """``require_witnessed_heads``: the operator's second bundle with its headsMap line
    dropped (the heads only the log key's word) fails by name; the honest one passes."""
    strict = VerificationPolicy(
        trust_root=world.operator.root, witness_policy=world.policy, require_witnessed_heads=True
    )
    honest = [json.dumps(r) for r in bundle(world)]
    assert outcome_of(verify_bundle_lines(honest, strict, workers=1)) is Outcome.VERIFIED
    other = [r for r in _second_heads(world, bundle(world)) if r["type"] != "headsMap"]
    report = verify_bundle_lines([json.dumps(r) for r in other], strict, workers=1)
    assert outcome_of(report) is Outcome.FAILED
    assert [(f.check, f.where) for f in report.findings] == [(Check.HEADS_MAP, "heads")]
    assert "the log key's word" in report.findings[0].reason


def test_audit_recomputes_every_heads_leaf_from_the_events_before_it(world: World) -> None:
    """``kernelindex audit`` walks the heads leaves in sequence with the events, each one's
    map recomputed; a stored heads leaf that is not the map of the leaves before it fails
    ``leaf`` by name (the tree rebuilt from it then fails ``tree`` too)."""
    clean = audit_ledger(world.ledger)
    assert not any(clean.failed.values()), clean.findings
    assert clean.facts["treeSize"] == world.ledger.tlog.checkpoint().size
    with world.ledger.store.transaction(commit=True) as session:
        session.execute(update(leaves).where(leaves.c.leaf_index == 5).values(leaf_hash=bytes(32)))
    tampered = audit_ledger(world.ledger)
    assert ("heads leaf 5", Check.LEAF) in {(f.where, f.check) for f in tampered.findings}
    assert tampered.failed[Check.LEAF] == 1 and tampered.failed[Check.TREE]


def test_kernelindex_verify_policy_says_the_heads_are_witnessed_or_fails_heads_map(
    world: World, tmp_path: Path
) -> None:
    """As a user runs it: ``kernelindex verify BUNDLE --trust-root --policy`` of the honest
    bundle says the heads are witnessed; of the operator's second bundle for the same
    checkpoint it exits 1 naming heads-map and the run."""
    root = tmp_path / "trust-root.json"
    root.write_text(json.dumps(world.operator.root.to_json()))
    policy = tmp_path / "witnesses.policy"
    policy.write_text(world.policy_text)
    honest = bundle(world)
    shown: dict[str, str] = {}
    for name, records in (("honest", honest), ("other", _second_heads(world, bundle(world)))):
        path = tmp_path / f"{name}.bundle"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        args = ["verify", str(path), "--trust-root", str(root), "--policy", str(policy)]
        result = CliRunner().invoke(app, args)
        shown[name] = f"{result.exit_code} {result.stdout}"
    assert shown["honest"].startswith("0 VERIFIED"), shown["honest"]
    assert "heads witnessed: the heads leaf is in the checkpoint" in shown["honest"]
    assert shown["other"].startswith("1 FAILED"), shown["other"]
    assert f"heads-map at run {world.seed}" in shown["other"]
