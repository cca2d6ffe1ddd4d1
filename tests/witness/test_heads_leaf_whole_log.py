"""A whole-log bundle's heads leaves, each recomputed by the offline verifier from the events
before it (``heads-map``), on SQLite and PostgreSQL.

The operator holds the log key, so it can sign a tree whose heads leaf commits to heads the
log's events do not have (a run's last attestation, or a group's member, left out): every
inclusion proof then holds, and only recomputing the map from the events catches it. Each
forged bundle here is what such an operator would export: every leaf hash, proof and the
checkpoint made again under the log key."""

from __future__ import annotations

import base64
import copy
import io
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from domain.event_names import EventName
from ledger.application import Ledger
from ledger.bundle import export_bundle
from ledger.event_verification import CheckOutcome, EventVerification
from ledger.proofs.hasher import leaf_hash
from ledger.proofs.heads import GroupHead, members_digest
from ledger.proofs.heads_map import HeadsState, heads_leaf_data
from ledger.proofs.log_entries import LogEntry
from ledger.proofs.reference import inclusion_proof, root
from ledger.proofs.signed_note import format_checkpoint, sign_note
from ledger.signing.authoring import attachment_envelope, ingestion_envelope
from ledger.signing.keys import SigningKey
from ledger.verification_report import Check, Report
from ledger.verify import Outcome, VerificationPolicy, outcome_of, verify_bundle_lines
from ledger.verify.heads_map import GroupJoins
from tests.projections.projection_world import GROUP, MANIFESTS, NAMES, RUN_21613, SEED
from tests.projections.projection_world import World as ProjectionWorld
from tests.witness.test_heads_leaf import World, world  # noqa: F401 - the fixture

Records = list[dict[str, Any]]


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def _whole_log(w: World) -> Records:
    out = io.StringIO()
    export_bundle(w.ledger, out)
    return [json.loads(text) for text in out.getvalue().splitlines()]


def _verify(w: World, records: Records, workers: int = 1) -> Report:
    policy = VerificationPolicy(trust_root=w.operator.root)
    return verify_bundle_lines([json.dumps(r) for r in records], policy, workers=workers)


def _signed_again(w: World, records: Records, roots: dict[int, bytes]) -> Records:
    return _signed_by(w.operator.root.origin, w.operator.log, records, roots)


def _signed_by(
    origin: str, log_key: SigningKey, records: Records, roots: dict[int, bytes]
) -> Records:
    """The whole-log bundle the operator would sign with these heads leaves' roots instead:
    leaf hashes, the tree, every inclusion proof and the checkpoint made again under the log
    key (the witnesses' cosignatures, of the honest tree, left out)."""
    forged = copy.deepcopy([r for r in records if r["type"] != "witnessed"])
    hashes: dict[int, bytes] = {}
    for r in forged:
        if r["type"] == "event":
            entry = LogEntry(
                r["position"],
                r["aggregate"],
                r["version"],
                r["topic"],
                r["envelope"],
                r["receivedAt"],
            )
            hashes[r["leafIndex"]] = entry.leaf_hash()
        elif r["type"] == "headsLeaf":
            index = r["leafIndex"]
            if index in roots:
                r["root"] = _b64(roots[index])
            stated = base64.b64decode(r["root"])
            hashes[index] = leaf_hash(heads_leaf_data(origin, index, stated))
    tree = [hashes[i] for i in range(len(hashes))]
    for r in forged:
        if r["type"] in {"event", "headsLeaf"}:
            r["proof"] = [_b64(h) for h in inclusion_proof(r["leafIndex"], tree)]
        elif r["type"] == "checkpoint":
            text = format_checkpoint(origin, len(tree), root(tree))
            r["note"] = sign_note(text, origin, log_key.private_key())
    return forged


def _ingestions(records: Records) -> dict[str, int]:
    """Each run's ingestion leaf: where the runs of the heads-leaf world join its group."""
    found = {}
    for r in records:
        if r["type"] == "event" and r["topic"].endswith(EventName.RUN_INGESTED):
            statement = json.loads(base64.b64decode(r["envelope"]["payload"]))
            found["sha256:" + statement["subject"][0]["digest"]["sha256"]] = r["leafIndex"]
    return found


def _heads_before(
    records: Records,
    index: int,
    joined: dict[str, int] | None = None,
    *,
    drop_leaf: int | None = None,
    drop_member: str | None = None,
) -> bytes:
    """The map root of the events before leaf ``index``, as this test reads them (``joined``:
    the leaf at which each run joined the one group; by default its ingestion), less one
    event or one member."""
    joined = _ingestions(records) if joined is None else joined
    state = HeadsState(index)
    heads: dict[str, tuple[int, int]] = {}
    for r in records:
        if r["type"] != "event" or r["leafIndex"] >= index or r["leafIndex"] == drop_leaf:
            continue
        heads[r["aggregate"]] = (r["version"], r["leafIndex"])
    state.set_aggregates(heads)
    state.join(
        [
            (run, GROUP)
            for run, leaf in joined.items()
            if leaf < index and leaf != drop_leaf and run != drop_member
        ]
    )
    return state.map.root()


def _heads_leaves(records: Records) -> dict[int, bytes]:
    return {
        r["leafIndex"]: base64.b64decode(r["root"]) for r in records if r["type"] == "headsLeaf"
    }


def _named(report: Report) -> list[tuple[str, str]]:
    return [(f.check, f.where) for f in report.findings]


def test_every_heads_leaf_of_an_untouched_whole_log_bundle_is_recomputed(world: World) -> None:
    """Untouched (and signed again unchanged): VERIFIED, each heads leaf held to the map of
    the events before it, in this process and across worker processes."""
    records = _whole_log(world)
    stated = _heads_leaves(records)
    assert sorted(stated) == [3, 5, 7, 9, 11]
    assert all(_heads_before(records, i) == r for i, r in stated.items())
    for bundle in (records, _signed_again(world, records, {})):
        for workers in (1, 2):
            report = _verify(world, bundle, workers)
            assert outcome_of(report) is Outcome.VERIFIED, report.findings
            assert report.passed[Check.HEADS_MAP] == len(stated)
            assert report.failed[Check.HEADS_MAP] == 0


def test_a_heads_leaf_that_leaves_out_an_event_or_a_member_fails_heads_map(world: World) -> None:
    """A sweep over every heads leaf: its root made from the events before it less one
    aggregate's last event (a run's attestation or ingestion, a key's registration: that
    run or key shown one event short), or less one member of the group, in a tree signed
    again by the log key: FAILED, ``heads-map`` naming exactly that heads leaf, and nothing
    else failing (every proof holds)."""
    records = _whole_log(world)
    forged = 0
    for index in _heads_leaves(records):
        last = {
            r["aggregate"]: r["leafIndex"]
            for r in records
            if r["type"] == "event" and r["leafIndex"] < index
        }
        variants = [_heads_before(records, index, drop_leaf=leaf) for leaf in last.values()]
        if index > 4:  # the seed run joined the group at leaf 4
            variants.append(_heads_before(records, index, drop_member=SEED))
        for variant in variants:
            assert variant != _heads_before(records, index)
            report = _verify(world, _signed_again(world, records, {index: variant}))
            assert outcome_of(report) is Outcome.FAILED
            assert _named(report) == [(Check.HEADS_MAP, f"heads leaf {index}")]
            assert "not the one of the log's events before it" in report.findings[0].reason
            forged += 1
    assert forged == 3 + 4 + 4 + 4 + 5 + 4  # aggregates before each heads leaf, and members


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_other_root_in_any_heads_leaf_fails_heads_map_by_name(
    world: World, data: st.DataObject
) -> None:
    records = _cached_whole_log(world)
    stated = _heads_leaves(records)
    index = data.draw(st.sampled_from(sorted(stated)))
    other = data.draw(st.binary(min_size=32, max_size=32).filter(lambda r: r != stated[index]))
    report = _verify(world, _signed_again(world, records, {index: other}))
    assert outcome_of(report) is Outcome.FAILED
    assert _named(report) == [(Check.HEADS_MAP, f"heads leaf {index}")]


_EXPORTED: dict[int, Records] = {}


def _cached_whole_log(w: World) -> Records:
    """One export per world (hypothesis runs the test body many times on one fixture)."""
    return _EXPORTED.setdefault(id(w), _whole_log(w))


def _verified(event: EventName, run: str, manifests: dict[str, Any]) -> EventVerification:
    found = EventVerification(
        position=1, version=1, event=event, subject_digest=run, predicate={"manifests": manifests}
    )
    found.checks.append(CheckOutcome(Check.SIGNATURE, True, ""))
    return found


@pytest.mark.parametrize("attached", ["workload", "implementation"])
def test_a_run_joins_its_group_once_at_the_event_that_gave_it_a_workload(attached: str) -> None:
    """The rule audit and the whole-log verifier share: an ingestion with a workload joins
    at once; one without joins at the attachment that completes it with one; a run joins
    once, whatever is attached later."""
    full = MANIFESTS[SEED]
    bare = {k: v for k, v in full.items() if k != attached}
    joins = GroupJoins()
    assert joins.observe(_verified(EventName.RUN_INGESTED, "sha256:aa", full)) == GROUP
    assert joins.observe(_verified(EventName.RUN_MANIFESTS_ATTACHED, "sha256:aa", full)) is None
    first = joins.observe(_verified(EventName.RUN_INGESTED, "sha256:bb", bare))
    completed = joins.observe(
        _verified(EventName.RUN_MANIFESTS_ATTACHED, "sha256:bb", {attached: full[attached]})
    )
    if attached == "workload":
        assert (first, completed) == (None, GROUP)
    else:  # it had its workload: it joined at its ingestion
        assert (first, completed) == (GROUP, None)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.text(min_size=1, max_size=12), st.sampled_from("ab")), max_size=6),
        max_size=6,
    )
)
# Found by CI: a member that is another's prefix followed by a character below the line's
# newline ("0" and "0\t") sorted one way as text and the other as lines.
@example([[("0", "a"), ("0\t", "a")]])
def test_a_group_folded_commit_by_commit_has_the_heads_notes_digest(
    commits: list[list[tuple[str, str]]],
) -> None:
    """The map's group value (kept sorted as members join) is the heads note's: the members'
    count and ``members_digest``, whatever order and repeats they joined in."""
    state = HeadsState(0)
    members: dict[str, set[str]] = {}
    for rows in commits:
        state.join(rows)
        for run, key in rows:
            members.setdefault(key, set()).add(run)
        for key, runs in members.items():
            assert state.group_head(key) == GroupHead(len(runs), members_digest(runs))


def test_a_run_that_joins_its_group_at_an_attachment_is_folded_where_it_joined(
    db_url: str,
) -> None:
    """A run ingested without its workload joins its group at the attachment that gives it
    one: the whole-log verifier folds it there, as the writer did (VERIFIED, every heads
    leaf recomputed); a heads leaf after the attachment that leaves that joining out fails
    ``heads-map`` by name."""
    w = ProjectionWorld.create(db_url)
    try:
        w.ledger.tlog.enable_heads_leaf()
        bare = {role: doc for role, doc in MANIFESTS[SEED].items() if role != "workload"}
        w.append(ingestion_envelope(bare, w.keys.ingester, now=w.clock.now))
        w.ingest(RUN_21613)
        attached = {"workload": MANIFESTS[SEED]["workload"]}
        w.append(attachment_envelope(SEED, NAMES[SEED], attached, w.keys.ingester, now=w.clock.now))
        exporter = Ledger(w.db_url, w.root, clock=w.clock, log_key=w.keys.log)
        try:
            out = io.StringIO()
            export_bundle(exporter, out)
        finally:
            exporter.close()
    finally:
        w.close()
    records = [json.loads(text) for text in out.getvalue().splitlines()]
    stated = _heads_leaves(records)
    ingested = _ingestions(records)
    (attachment,) = [
        r["leafIndex"] for r in records if r.get("topic", "").endswith("ManifestsAttached")
    ]
    joined = {RUN_21613: ingested[RUN_21613], SEED: attachment}
    assert len(stated) == 3 and all(
        _heads_before(records, i, joined) == r for i, r in stated.items()
    )
    policy = VerificationPolicy(trust_root=w.root)
    report = verify_bundle_lines([json.dumps(r) for r in records], policy, workers=1)
    assert outcome_of(report) is Outcome.VERIFIED, report.findings
    assert report.passed[Check.HEADS_MAP] == 3
    last = max(stated)
    forged_root = _heads_before(records, last, joined, drop_member=SEED)
    forged = _signed_by(w.root.origin, w.keys.log, records, {last: forged_root})
    report = verify_bundle_lines([json.dumps(r) for r in forged], policy, workers=1)
    assert _named(report) == [(Check.HEADS_MAP, f"heads leaf {last}")]
