"""Complete bundles, freshness and anchoring (issue 13 §2–§5), on SQLite and PostgreSQL.

The world: the SOL 056 cohort (four runs, one comparison group); the seed run attested twice,
verified by a rerun and then refuted by a later one; its attester's key revoked afterwards.
Each omission a bundle editor could make — the latest event, one from the middle, a key's
revocation, a rival of the group — fails ``verify`` with a named check even when the claims
are edited to match what is left; a bundle behind a checkpoint the user holds is STALE; one
verified with nothing pinned is UNANCHORED.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from domain.evidence import EvidenceLevel
from domain.statements import Role
from ledger.application import Ledger
from ledger.ids import principal_id, run_id
from ledger.signing.authoring import key_registration_envelope, key_revocation_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.verification_report import Report
from ledger.verify import (
    Expectation,
    Outcome,
    VerificationPolicy,
    outcome_of,
    verify_bundle_lines,
)
from projections.export import export_runs
from tests.projections.projection_world import (
    ALL_RUNS,
    GROUP,
    RUN_15149,
    RUN_21613,
    RUN_36818,
    SEED,
    World,
    gpu,
)

# The seed's comparison group (RUN_15149 measured another workload: a group of its own).
MEMBERS = (SEED, RUN_21613, RUN_36818)

Records = list[dict[str, Any]]


@dataclass
class Exported:
    world: World
    ledger: Ledger  # the same database, with the log key (it signs checkpoints and heads)

    def bundle(self, runs: list[str] | None = None, **kwargs: Any) -> Records:
        out = io.StringIO()
        export_runs(self.ledger, out, runs, **kwargs)
        return [json.loads(line) for line in out.getvalue().splitlines()]

    def checkpoint(self) -> str:
        return self.ledger.tlog.sign_checkpoint().note

    def grow(self) -> None:
        """Something more in the log (a key registered), unrelated to the seed's bundle."""
        newcomer = SigningKey.generate()
        self.world.append(
            key_registration_envelope(
                newcomer.public, [Role.ATTESTER], newcomer, now=self.world.clock.now
            )
        )


@pytest.fixture
def exported(db_url: str) -> Exported:
    w = World.create(db_url)
    w.ingest()
    w.append(w.attest_envelope(SEED, "first note"))
    w.append(w.attest_envelope(SEED, "second note"))
    verifying = w.request_rerun(SEED)
    w.append(w.result_envelope(verifying, w.keys.agents[0], gpu_hash=gpu(1)))
    w.append(w.attest_envelope(SEED, "third note"))
    refuting = w.request_rerun(SEED)
    w.append(w.result_envelope(refuting, w.keys.agents[1], gpu_hash=gpu(2), correct=False))
    w.append(key_revocation_envelope(w.keys.attester.public, w.keys.admin, now=w.clock.now))
    return Exported(w, Ledger(db_url, w.root, clock=w.clock, log_key=w.keys.log))


def verify(records: Records, root: TrustRoot | None, **policy: Any) -> Report:
    lines = [json.dumps(r) + "\n" for r in records]
    return verify_bundle_lines(lines, VerificationPolicy(trust_root=root, **policy), workers=1)


def events(records: Records) -> Records:
    return [r for r in records if r["type"] == "event"]


def without(records: Records, drop: Callable[[dict[str, Any]], bool]) -> Records:
    """The bundle without the event lines ``drop`` picks, its footer count fixed up."""
    kept = [r for r in records if not (r["type"] == "event" and drop(r))]
    assert len(kept) < len(records), "nothing was dropped"
    kept[-1] = {"type": "footer", "events": len(events(kept))}
    return kept


def claim_of(records: Records, run: str) -> dict[str, Any]:
    return next(r for r in records if r["type"] == "claim" and r["run"] == run)


def of_run(run: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r["aggregate"] == str(run_id(run))


def failed_with(report: Report, check: str, words: str) -> None:
    assert outcome_of(report) is Outcome.FAILED, report.to_json()
    reasons = [f.reason for f in report.findings if f.check == check]
    assert any(words in r for r in reasons), (check, words, report.findings)


# ------------------------------------------------------------------------------ honest


def test_an_honest_run_bundle_is_complete_and_verifies(exported: Exported) -> None:
    records = exported.bundle([SEED])
    kinds = [r["type"] for r in records]
    assert kinds[:4] == ["header", "trustRoot", "checkpoint", "heads"]
    heads_note = records[3]["note"]
    for run in MEMBERS:  # the whole group travels with the run
        assert f"run {run} " in heads_note
    assert f"run {RUN_15149} " not in heads_note
    assert f"group {GROUP} 3 " in heads_note
    report = verify(records, exported.world.root)
    assert outcome_of(report) is Outcome.VERIFIED, report.findings
    assert report.passed["complete"] >= len(MEMBERS) + 3 and report.passed["group"] == 1
    seed = claim_of(records, SEED)
    assert seed["evidence"]["level"] == "refuted"


def test_every_honest_bundle_of_the_world_verifies(exported: Exported) -> None:
    root = exported.world.root
    for run in ALL_RUNS:
        assert verify(exported.bundle([run]), root).verified
    assert verify(exported.bundle(None, cohort=GROUP), root).verified
    assert verify(exported.bundle(None), root).verified  # the whole log


# ------------------------------------------------------------------- omissions (§2)


def test_the_latest_refuting_rerun_left_out_and_the_claim_edited(exported: Exported) -> None:
    records = exported.bundle([SEED])
    latest = max((r for r in events(records) if of_run(SEED)(r)), key=lambda r: r["version"])
    assert latest["topic"].endswith("Run.RerunRecorded")
    edited = without(records, lambda r: r is latest)
    claim = claim_of(edited, SEED)  # edited to what the rest adds up to:
    claim["evidence"]["level"] = "verified"
    claim["standings"]["verified"] = {"rank": 1, "of": 1}
    report = verify(edited, exported.world.root)
    failed_with(report, "complete", "its latest")
    assert report.failed["claim"] == 0  # the claim matches the events left: only heads tell


def test_an_event_from_the_middle_left_out(exported: Exported) -> None:
    records = exported.bundle([SEED])
    middle = next(
        r for r in events(records) if of_run(SEED)(r) and r["topic"].endswith("Run.Attested")
    )
    report = verify(without(records, lambda r: r is middle), exported.world.root)
    failed_with(report, "complete", f"versions {middle['version']}..{middle['version']}")


def test_a_key_revocation_left_out(exported: Exported) -> None:
    records = exported.bundle([SEED])
    attester = str(principal_id(exported.world.keys.attester.key_id))
    revoked = next(
        r for r in events(records) if r["aggregate"] == attester and r["topic"].endswith("Revoked")
    )
    report = verify(without(records, lambda r: r is revoked), exported.world.root)
    failed_with(report, "complete", "its latest")
    assert any(exported.world.keys.attester.key_id in f.where for f in report.findings)


def test_the_groups_rivals_left_out_and_rank_one_of_one_claimed(exported: Exported) -> None:
    records = exported.bundle([SEED])
    rivals = {str(run_id(r)) for r in MEMBERS if r != SEED}
    edited = without(records, lambda r: r["aggregate"] in rivals)
    edited = [r for r in edited if not (r["type"] == "claim" and r["run"] != SEED)]
    claim = claim_of(edited, SEED)
    claim["standings"] = {"source-native": {"rank": 1, "of": 1}}
    claim["evidence"]["level"] = "refuted"
    report = verify(edited, exported.world.root)
    failed_with(report, "group", "say it had 3 members at this checkpoint")
    failed_with(report, "complete", "the log has")


def test_only_the_claim_edited(exported: Exported) -> None:
    records = exported.bundle([SEED])
    claim_of(records, SEED)["evidence"]["level"] = "replicated"
    failed_with(verify(records, exported.world.root), "claim", "claims evidence level")


def test_heads_of_another_export_do_not_prove_a_group(exported: Exported) -> None:
    """Genuine heads, signed by the log key at the very same checkpoint, but of another
    export (the run's own history, without its group): swapped into the group bundle, they
    do not prove the group, nor cover its rivals' events."""
    records = exported.bundle([SEED])
    own = exported.bundle([SEED], group=False)
    assert next(r for r in own if r["type"] == "checkpoint") == next(
        r for r in records if r["type"] == "checkpoint"
    )
    at = next(i for i, r in enumerate(records) if r["type"] == "heads")
    records[at] = next(r for r in own if r["type"] == "heads")
    report = verify(records, exported.world.root)
    assert report.passed["heads"] == 1  # the note itself is genuine
    failed_with(report, "group", "the heads do not prove who its members are")
    failed_with(report, "complete", "which the heads do not cover")
    # A note edited after signing is refused outright.
    forged = copy.deepcopy(records[at])
    body, signature = forged["note"].split("\n\n", 1)
    forged["note"] = body.replace(f"run {SEED} ", f"run {SEED}  ") + "\n\n" + signature
    records[at] = forged
    failed_with(verify(records, exported.world.root), "heads", "does not verify")


def test_an_event_outside_the_heads_is_refused(exported: Exported) -> None:
    """A bundle holds what its heads describe and nothing else (nothing unproven to fold)."""
    records = exported.bundle([RUN_15149])
    agent = str(principal_id(exported.world.keys.agents[0].key_id))
    assert all(r["aggregate"] != agent for r in events(records))
    outsider = next(r for r in events(exported.bundle(None)) if r["aggregate"] == agent)
    at = next(i for i, r in enumerate(records) if r["type"] == "event")
    records.insert(at, outsider)
    records[-1] = {"type": "footer", "events": len(events(records))}
    failed_with(verify(records, exported.world.root), "complete", "which the heads do not cover")


# -------------------------------------------------------------------- freshness (§3)


def test_a_bundle_behind_a_checkpoint_you_hold_is_stale(exported: Exported) -> None:
    records = exported.bundle([SEED])
    w = exported.world
    exported.grow()
    newer = exported.checkpoint()
    report = verify(records, w.root, held_checkpoints=[newer])
    assert outcome_of(report) is Outcome.STALE
    assert report.failed["freshness"] == 1 and set(report.failed) == {"freshness"}
    # Exported again, against the checkpoint held: fresh (it reaches the held checkpoint).
    held = int(newer.split("\n")[1])
    again = exported.bundle([SEED], held=[held])
    assert any(r["type"] == "consistency" and r["from"] == held for r in again)
    report = verify(again, w.root, held_checkpoints=[newer])
    assert outcome_of(report) is Outcome.VERIFIED, report.findings
    assert report.passed["freshness"] == 1


def test_an_older_checkpoint_you_hold_needs_the_consistency_proof(exported: Exported) -> None:
    older = exported.checkpoint()
    w = exported.world
    exported.grow()
    plain = exported.bundle([SEED])
    failed_with(verify(plain, w.root, held_checkpoints=[older]), "consistency", "no proof")
    proven = exported.bundle([SEED], held=[int(older.split("\n")[1])])
    assert verify(proven, w.root, held_checkpoints=[older]).verified
    # A consistency proof that does not hold (a forked older tree) fails by name.
    line = next(r for r in proven if r["type"] == "consistency")
    line["proof"] = line["proof"][::-1] if len(line["proof"]) > 1 else [line["proof"][0][::-1]]
    failed_with(verify(proven, w.root, held_checkpoints=[older]), "consistency", "fork")


# -------------------------------------------------------------------- anchoring (§4)


def test_nothing_pinned_is_unanchored_and_an_impostor_ledger_never_verifies(
    exported: Exported, tmp_path: Any
) -> None:
    """An attacker's own ledger with the same origin, the attacker's keys in its trust root:
    unpinned it agrees with itself (UNANCHORED, never VERIFIED); pinned, it FAILS."""
    from ledger.store.schema import upgrade
    from tests.projections.projection_world import Keys

    honest = exported.bundle([SEED])
    assert outcome_of(verify(honest, None)) is Outcome.UNANCHORED
    assert outcome_of(verify(honest, None, allow_unanchored=True)) is Outcome.VERIFIED

    url = f"sqlite:///{tmp_path / 'impostor.db'}"
    upgrade(url)
    impostor = World.create(url, Keys.generate())
    assert impostor.root.origin == exported.world.root.origin
    impostor.ingest(SEED)
    forged = Exported(
        impostor, Ledger(url, impostor.root, clock=impostor.clock, log_key=impostor.keys.log)
    ).bundle([SEED])
    assert outcome_of(verify(forged, None)) is Outcome.UNANCHORED
    pinned = verify(forged, exported.world.root)
    assert outcome_of(pinned) is Outcome.FAILED
    assert pinned.failed["trust-root"] == 1


# ------------------------------------------------------------ the caller's policy


@pytest.mark.parametrize(
    ("expect", "ok"),
    [
        (Expectation(SEED[:15]), True),
        (Expectation(SEED, min_level=EvidenceLevel.REFUTED), True),
        (Expectation(SEED, min_level=EvidenceLevel.REPORTED), False),
        (Expectation(RUN_21613, rank=1), True),
        (Expectation(RUN_21613, rank=2), False),
        (Expectation(RUN_15149), False),  # not in the seed's bundle
        (Expectation("sha256:" + "0" * 64), False),
    ],
)
def test_the_caller_states_what_the_bundle_must_prove(
    exported: Exported, expect: Expectation, ok: bool
) -> None:
    report = verify(exported.bundle([SEED]), exported.world.root, expect=expect)
    assert (outcome_of(report) is Outcome.VERIFIED) is ok, report.findings
    if not ok:
        assert report.failed["expectation"] >= 1


def test_a_whole_log_bundle_proves_any_runs_rank(exported: Exported) -> None:
    """Every leaf is there, so every group is complete: any run's rank can be shown."""
    whole = exported.bundle(None)
    root = exported.world.root
    assert verify(whole, root, expect=Expectation(RUN_15149, rank=1)).verified
    assert verify(whole, root, expect=Expectation(SEED, rank=3)).verified


# ------------------------------------------------- a lying operator's heads are evidence


def test_audit_checks_a_heads_note_against_the_log(exported: Exported) -> None:
    """A heads note is the operator's signed word: honest heads audit clean; heads the log
    key signed but the log does not bear out (a run's latest event hidden) fail by name."""
    from ledger.audit import audit_ledger
    from ledger.proofs.heads import Head, parse_heads, sign_heads
    from ledger.proofs.signed_note import open_note

    records = exported.bundle([SEED])
    note = next(r for r in records if r["type"] == "heads")["note"]
    assert audit_ledger(exported.ledger, heads=[note]).verified
    heads = parse_heads(open_note(note, [exported.ledger.tlog.verifier]).text)
    runs = dict(heads.runs)
    runs[SEED] = Head(runs[SEED].events - 1, runs[SEED].last_leaf - 1)
    lie = sign_heads(
        type(heads)(heads.origin, heads.size, heads.root, runs, heads.keys, heads.groups),
        exported.world.keys.log.private_key(),
    )
    report = audit_ledger(exported.ledger, heads=[lie])
    assert not report.verified
    assert any(
        f.check == "heads" and f"run {SEED}" in f.reason and "disagrees" in f.reason
        for f in report.findings
    )


# ------------------------------------------- found by an attacker reviewing this design


def test_an_unsigned_header_cannot_switch_completeness_off(exported: Exported) -> None:
    """The header is not signed: "all": false (or anything but true) with the heads removed
    once made the bundle neither whole-log nor scoped, and a bundle with the refuting rerun
    and the rivals left out VERIFIED. Without heads, only a whole-log bundle passes."""
    records = exported.bundle([SEED])
    rivals = {str(run_id(r)) for r in MEMBERS if r != SEED}
    latest = max((r for r in events(records) if of_run(SEED)(r)), key=lambda r: r["version"])
    edited = without(records, lambda r: r is latest or r["aggregate"] in rivals)
    edited = [
        r
        for r in edited
        if r["type"] != "heads" and not (r["type"] == "claim" and r["run"] != SEED)
    ]
    claim = claim_of(edited, SEED)
    claim["evidence"]["level"] = "verified"
    claim["standings"] = {"source-native": {"rank": 1, "of": 1}, "verified": {"rank": 1, "of": 1}}
    for scope in ({"all": False}, {"all": None}, {"all": 0}, {}, {"runs": [SEED]}):
        edited[0]["scope"] = scope
        report = verify(edited, exported.world.root, expect=Expectation(SEED, rank=1))
        failed_with(report, "complete", "no heads")


def test_the_header_cannot_name_a_run_the_heads_do_not_cover(exported: Exported) -> None:
    records = exported.bundle([RUN_15149])
    records[0]["scope"]["runs"] = [SEED]
    failed_with(verify(records, exported.world.root), "complete", "which the heads do not cover")


def test_the_reported_scope_is_what_the_heads_sign_not_the_header(exported: Exported) -> None:
    """The header is unsigned: what it says (a group, an origin, a field of its own) never
    reaches the report as a fact. The scope reported is what the signed heads cover: the
    run asked for and the rivals of its group, every one held to its head."""
    records = exported.bundle([SEED])
    honest = verify(records, exported.world.root)
    assert outcome_of(honest) is Outcome.VERIFIED
    assert honest.facts["scope"] == {"runs": sorted(MEMBERS), "groups": [GROUP]}
    records[0]["scope"] = {"runs": [SEED], "groups": ["made-up-group"], "note": "trusted"}
    records[0]["origin"] = "someone else's log"
    edited = verify(records, exported.world.root)
    assert edited.facts["scope"] == honest.facts["scope"]
    records[0]["scope"] = {"all": True}  # nor does a header that claims the whole log
    assert verify(records, exported.world.root).facts["scope"] == honest.facts["scope"]
    whole = exported.bundle()
    report = verify(whole, exported.world.root)
    assert outcome_of(report) is Outcome.VERIFIED
    assert report.facts["scope"] == {"all": True}
    # "all" is a fact once every leaf was found, not because the header says so.
    short = without(whole, lambda r: r is events(whole)[-1])
    assert "scope" not in verify(short, exported.world.root).facts


@pytest.mark.parametrize(
    "edit",
    [
        lambda c: c["evidence"].__setitem__("policyVersion", "evidence-v0"),
        lambda c: c["evidence"].__setitem__("reasons", ["made up, never checked"]),
        lambda c: c["standings"].__setitem__("overall", {"rank": 1, "of": 1}),
        lambda c: c.__setitem__("badge", "gold"),
        lambda c: c["standings"].__setitem__("source-native", {"rank": True, "of": 3}),
        lambda c: c["standings"].__setitem__("source-native", {"rank": 3.0, "of": 3}),
    ],
    ids=["policy", "extra-evidence", "unknown-view", "extra-field", "bool-rank", "float-rank"],
)
def test_every_field_of_a_claim_is_checked_or_refused(exported: Exported, edit: Any) -> None:
    """A claim field the verifier does not recompute must not be there for a reader to take
    as verified."""
    records = exported.bundle([SEED])
    edit(claim_of(records, SEED))
    failed_with(verify(records, exported.world.root), "claim", "")


def test_an_expectation_needs_a_prefix_long_enough(exported: Exported) -> None:
    records = exported.bundle([SEED])
    report = verify(records, exported.world.root, expect=Expectation("7"))
    failed_with(report, "expectation", "at least 8 hex digits")
