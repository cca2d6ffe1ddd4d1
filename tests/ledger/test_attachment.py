"""Attaching a manifest a run names by digest (issue 14: the seed run must not stay unranked).

A run ingested without its workload has no comparison key. An ingester-signed attachment
adds the manifest, checked against the digest the run names; the run joins its group, in
the projections, in the ledger's group index (heads) and in the offline verifier's fold,
and its evidence level never moves. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import io
import itertools
import json
from typing import Any

import pytest
from sqlalchemy import delete, insert, select

from domain.errors import DomainError
from domain.run_facts import comparison_key_of
from ledger.application import Ledger
from ledger.audit import audit_ledger
from ledger.errors import AlreadyExistsError, WrongRoleError
from ledger.history import describe, run_history
from ledger.signing.authoring import attachment_envelope, attestation_envelope, ingestion_envelope
from ledger.store.group_index import group_members
from ledger.verify import Expectation, Outcome, VerificationPolicy, outcome_of, verify_bundle_lines
from projections.export import export_runs
from tests.projections.projection_world import (
    ALL_RUNS,
    GROUP,
    MANIFESTS,
    NAMES,
    RUN_15149,
    RUN_21613,
    RUN_36818,
    SEED,
    World,
)

WORKLOAD = MANIFESTS[SEED]["workload"]
BARE_SEED = {role: doc for role, doc in MANIFESTS[SEED].items() if role != "workload"}


@pytest.fixture
def world(db_url: str) -> Any:
    w = World.create(db_url)
    yield w
    w.close()


def _ingest_bare_seed(world: World) -> None:
    world.append(ingestion_envelope(BARE_SEED, world.keys.ingester, now=world.clock.now))


def _attach(world: World, attached: dict[str, Any], key: Any = None) -> dict[str, Any]:
    return attachment_envelope(
        SEED, NAMES[SEED], attached, key or world.keys.ingester, now=world.clock.now
    )


def test_an_attached_workload_ranks_the_run_and_leaves_its_evidence(world: World) -> None:
    world.ingest(RUN_21613, RUN_36818, RUN_15149)
    _ingest_bare_seed(world)
    before = world.row(SEED)
    assert before.comparison_key is None and world.standing(SEED) is None
    receipt = world.append(_attach(world, {"workload": WORKLOAD}))
    assert receipt.event == "Run.ManifestsAttached" and receipt.inclusion is not None
    after = world.row(SEED)
    assert after.comparison_key == GROUP
    assert world.standing(SEED) == (3, 3)
    for column in ("evidence_level", "evidence_reasons", "evidence_caused_by", "claimed"):
        assert getattr(after, column) == getattr(before, column), column


def test_the_views_after_an_attachment_are_those_of_a_rebuild(world: World) -> None:
    world.ingest(RUN_21613, RUN_36818)
    _ingest_bare_seed(world)
    world.append(_attach(world, {"workload": WORKLOAD}))
    folded = world.views()
    world.runner().rebuild()
    assert world.runner().table_digests() == folded


def _other_workload() -> dict[str, Any]:
    other = json.loads(json.dumps(WORKLOAD))
    other["metadata"]["name"] += "-other"
    other["spec"]["cases"] = other["spec"]["cases"][:1]
    return dict(other)


@pytest.mark.parametrize(
    ("attached", "error", "says"),
    [
        # Another workload than the one the run names.
        (
            lambda: {"workload": _other_workload()},
            DomainError,
            "digests to",
        ),
        (lambda: {"workload": {**WORKLOAD, "kind": "BenchmarkProtocol"}}, DomainError, "must be"),
        (lambda: {"protocol": MANIFESTS[SEED]["protocol"]}, DomainError, "protocol"),
        (lambda: {}, DomainError, "implementation or a workload"),
        (lambda: {"workload": None}, DomainError, "implementation or a workload"),
    ],
    ids=["other-workload", "wrong-kind", "protocol", "empty", "null"],
)
def test_a_wrong_attachment_is_refused_and_changes_nothing(
    world: World, attached: Any, error: type[Exception], says: str
) -> None:
    _ingest_bare_seed(world)
    count = world.count()
    with pytest.raises(error, match=says):
        world.append(_attach(world, attached()))
    assert world.count() == count
    assert world.row(SEED).comparison_key is None


def test_only_an_ingester_attaches_and_only_what_the_run_lacks(world: World) -> None:
    world.ingest(RUN_21613)  # has its workload: nothing to attach
    count = world.count()
    with pytest.raises(AlreadyExistsError, match="already has its workload"):
        world.append(
            attachment_envelope(
                RUN_21613,
                NAMES[RUN_21613],
                {"workload": MANIFESTS[RUN_21613]["workload"]},
                world.keys.ingester,
                now=world.clock.now,
            )
        )
    _ingest_bare_seed(world)
    count = world.count()
    with pytest.raises(WrongRoleError):
        world.append(_attach(world, {"workload": WORKLOAD}, key=world.keys.attester))
    assert world.count() == count
    world.append(_attach(world, {"workload": WORKLOAD}))
    with pytest.raises(AlreadyExistsError, match="already has its workload"):
        world.clock.advance(seconds=1)
        world.append(_attach(world, {"workload": WORKLOAD}))
    # The same attachment again is the event it already is (an idempotent resubmission).
    assert world.count() == count + 1


def _bundle(world: World, runs: list[str]) -> list[str]:
    out = io.StringIO()
    exporter = Ledger(world.db_url, world.root, clock=world.clock, log_key=world.keys.log)
    try:
        export_runs(exporter, out, runs)
    finally:
        exporter.close()
    return out.getvalue().splitlines()


def _verify(world: World, lines: list[str], rank: int | None = None) -> Outcome:
    policy = VerificationPolicy(trust_root=world.root, expect=Expectation(run=SEED, rank=rank))
    return outcome_of(verify_bundle_lines(lines, policy, workers=1))


def test_a_bundle_proves_the_attached_rank_offline_and_not_without_the_attachment(
    world: World,
) -> None:
    world.ingest(RUN_21613, RUN_36818)
    _ingest_bare_seed(world)
    world.append(
        attestation_envelope(
            SEED, NAMES[SEED], world.keys.attester, type_="note", body="x", now=world.clock.now
        )
    )
    world.append(_attach(world, {"workload": WORKLOAD}))
    lines = _bundle(world, [SEED])
    assert _verify(world, lines, rank=3) is Outcome.VERIFIED
    topics = [json.loads(line).get("topic", "") for line in lines]
    at = next(i for i, t in enumerate(topics) if t.endswith("Run.ManifestsAttached"))
    # Drop the attachment (and fix the footer): the heads say the run has one more event.
    dropped = [line for i, line in enumerate(lines) if i != at]
    footer = json.loads(dropped[-1])
    footer["events"] -= 1
    dropped[-1] = json.dumps(footer)
    assert _verify(world, dropped) is Outcome.FAILED


def test_every_cohort_run_keeps_its_evidence_whatever_is_attached_when(world: World) -> None:
    """A sweep: each cohort run ingested bare, then given its workload, ends exactly as when
    ingested whole (same key, rank and evidence), and its history says what was attached."""
    for run in ALL_RUNS:
        bare = {role: doc for role, doc in MANIFESTS[run].items() if role != "workload"}
        world.append(ingestion_envelope(bare, world.keys.ingester, now=world.clock.now))
        level = world.row(run).evidence_level
        world.append(
            attachment_envelope(
                run,
                NAMES[run],
                {"workload": MANIFESTS[run]["workload"]},
                world.keys.ingester,
                now=world.clock.now,
            )
        )
        row = world.row(run)
        assert row.evidence_level == level
        assert row.comparison_key == comparison_key_of(MANIFESTS[run])
        history = run_history(world.ledger, run)
        assert history[-1].event == "Run.ManifestsAttached" and history[-1].ok
        assert describe(history[-1]).startswith("attached workload ")
    assert {r for r, _, _ in world.board()} == {SEED, RUN_21613, RUN_36818}


def _bare(run: str) -> dict[str, Any]:
    return {role: doc for role, doc in MANIFESTS[run].items() if role != "workload"}


def _index(world: World) -> dict[str, str]:
    with world.ledger.store.transaction(commit=False) as session:
        rows = session.execute(
            select(group_members.c.run_digest, group_members.c.comparison_key)
        ).all()
    return {str(r): str(k) for r, k in rows}


@pytest.mark.parametrize(
    "order", list(itertools.permutations(range(4), 3)), ids=lambda o: "-".join(map(str, o))
)
def test_the_group_index_is_what_the_admitted_events_say_in_any_group_of_writes(
    world: World, order: tuple[int, ...]
) -> None:
    """A sweep over groups of writes (one append_many, as the server's group writer makes):
    a bare ingestion, a full one (refused once the run exists), a workload attachment and a
    bare re-ingestion, in every order of three. The ledger's group index (what heads and
    bundles prove groups with) must equal each run's fold, whatever was refused."""
    world.ingest(RUN_36818)
    k = world.keys.ingester
    now = world.clock.now
    candidates = [
        ingestion_envelope(_bare(RUN_21613), k, now=now),
        ingestion_envelope(MANIFESTS[RUN_21613], k, now=now),
        attachment_envelope(
            RUN_21613, NAMES[RUN_21613], {"workload": MANIFESTS[RUN_21613]["workload"]}, k, now=now
        ),
        ingestion_envelope(_bare(RUN_21613), k, external_id="again", now=now),
    ]
    world.ledger.append_many([candidates[i] for i in order])
    expected = {}
    for run in (RUN_36818, RUN_21613):
        stored = world.ledger.run(run)
        if stored is not None and (key := comparison_key_of(stored.manifests())) is not None:
            expected[run] = key
    assert _index(world) == expected
    assert audit_ledger(world.ledger).verified  # positions too: audit folds them from the log
    assert world.row(RUN_36818).comparison_key == GROUP
    lines = _bundle(world, [RUN_36818])
    policy = VerificationPolicy(trust_root=world.root, expect=Expectation(run=RUN_36818))
    report = verify_bundle_lines(lines, policy, workers=1)
    assert outcome_of(report) is Outcome.VERIFIED, report.to_json()["findings"]


def test_audit_checks_the_group_index_against_the_log(world: World) -> None:
    """The index is what heads are signed from: audit folds membership from the events and
    fails a row the log does not support, or a member the index lost."""
    world.ingest(RUN_21613, RUN_36818)
    _ingest_bare_seed(world)
    world.append(_attach(world, {"workload": WORKLOAD}))
    assert audit_ledger(world.ledger).verified
    with world.ledger.store.transaction(commit=True) as session:
        session.execute(delete(group_members).where(group_members.c.run_digest == SEED))
        session.execute(
            insert(group_members).values(run_digest=RUN_15149, comparison_key=GROUP, position=1)
        )
    report = audit_ledger(world.ledger)
    assert not report.verified
    findings = json.dumps(report.to_json()["findings"])
    assert "group index" in findings and SEED[:19] in findings and RUN_15149[:19] in findings


def test_an_implementation_attached_in_the_ingestions_group_leaves_it_the_joining_event(
    world: World,
) -> None:
    """Ingested with its workload and given its implementation in the same group of writes:
    the run joined its group at the ingestion, and the index (and audit) say so."""
    k, now = world.keys.ingester, world.clock.now
    no_impl = {r: d for r, d in MANIFESTS[RUN_21613].items() if r != "implementation"}
    receipts = world.ledger.append_many(
        [
            ingestion_envelope(no_impl, k, now=now),
            attachment_envelope(
                RUN_21613,
                NAMES[RUN_21613],
                {"implementation": MANIFESTS[RUN_21613]["implementation"]},
                k,
                now=now,
            ),
        ]
    )
    assert [getattr(r, "event", None) for r in receipts] == [
        "Run.Ingested",
        "Run.ManifestsAttached",
    ]
    with world.ledger.store.transaction(commit=False) as session:
        position = session.execute(
            select(group_members.c.position).where(group_members.c.run_digest == RUN_21613)
        ).scalar_one()
    assert position == receipts[0].position  # type: ignore[union-attr]
    assert audit_ledger(world.ledger).verified


def test_a_runs_state_without_its_notes_holds_what_was_attached(world: World) -> None:
    """``Ledger.run_state`` and ``run_manifests`` (the readers that skip a run's notes) give
    the manifests, name and lifecycle the whole run's replay gives, attachments included."""
    _ingest_bare_seed(world)
    world.append(
        attestation_envelope(
            SEED, NAMES[SEED], world.keys.attester, type_="note", body="n", now=world.clock.now
        )
    )
    world.append(_attach(world, {"workload": WORKLOAD}))
    world.append(
        attestation_envelope(
            SEED, NAMES[SEED], world.keys.attester, type_="note", body="m", now=world.clock.now
        )
    )
    run, state = world.ledger.run(SEED), world.ledger.run_state(SEED)
    assert run is not None and state is not None
    assert state.manifests() == run.manifests() == world.ledger.run_manifests(SEED)
    assert state.manifests()["workload"] == WORKLOAD
    assert (state.run_name, state.retracted, state.superseded_by, state.jobs) == (
        run.run_name,
        run.retracted,
        run.superseded_by,
        run.jobs,
    )


def test_a_runs_state_fails_closed_on_a_record_without_its_ingestion(world: World) -> None:
    """A run whose stored ingestion was deleted (tampering) is not read as a run from what
    is left: the lean readers refuse it, as a replay of the whole run would."""
    from ledger.errors import CorruptRecordError
    from ledger.ids import run_id

    _ingest_bare_seed(world)
    world.append(_attach(world, {"workload": WORKLOAD}))
    events = world.ledger.store.events
    with world.ledger.store.transaction(commit=True) as session:
        session.execute(
            delete(events).where(
                (events.c.originator_id == run_id(SEED)) & (events.c.originator_version == 1)
            )
        )
    with pytest.raises(CorruptRecordError):
        world.ledger.run_state(SEED)
    with pytest.raises(CorruptRecordError):
        world.ledger.run_manifests(SEED)
