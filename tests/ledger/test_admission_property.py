"""The property that holds admission and verification together (issue 13, DESIGN.md §9):

    every envelope the ledger admits re-verifies OK in ``history``, ``audit`` and ``verify``,
    and every envelope it refuses appends nothing.

Hypothesis writes sequences of signed statements of every predicate type, by keys of every
kind (trust-root admin, registered, self-registered, revoked, expired, strangers), with the
odd shapes an attacker would try: duplicated or unsorted roles, back-dated or inverted
validity windows, issuedAt in the past or future, co-signatures, junk signatures, signatures
relabelled with another key id, statements resubmitted in new envelopes, reruns for jobs that
do not exist or answered from another device. The clock moves between statements. After the
sequence, the whole ledger must audit clean, every run's and key's history verify, and the
whole-log bundle and every run's bundle verify against the pinned trust root.

Kept below as explicit regressions, on both backends: the two cases issue 13 §1 filed, and
the ones met while this test and ``ledger.authority`` were written (the issuedAt judged at
the full-precision clock but stored at the millisecond is in tests/ledger/test_authority.py:
it needs a statement with microseconds, which the authoring helpers never write).
"""

from __future__ import annotations

import base64
import copy
import io
import json
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.errors import DomainError
from domain.importers.records import rerun_artifacts
from domain.statements import PredicateType, Role, make_statement
from domain.timestamps import format_time, utc_now
from ledger.admission_checks import KnownKeys, check_stateless
from ledger.application import Ledger
from ledger.audit import audit_ledger
from ledger.history import key_history, run_history
from ledger.signing.authoring import (
    ingestion_envelope,
    key_revocation_envelope,
    lifecycle_envelope,
    rerun_claim_envelope,
    rerun_request_envelope,
)
from ledger.signing.dsse import pae, sign_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store.artifacts import ArtifactStore
from ledger.store.schema import upgrade
from ledger.verify import Outcome, VerificationPolicy, outcome_of, verify_bundle_lines
from projections.export import export_runs
from tests.ledger.test_worker_checks import over_the_wire
from tests.projections.projection_world import ARTIFACTS, MANIFESTS, NAMES, SEED, rerun_result
from tests.unchecked_signing import signed_as_given, unchecked_rerun_envelope

RUNS = list(MANIFESTS)[:3]
KEYS = 5  # the pool beyond the admin and the ingester: registered (or not) by the statements
ROLES = [str(r) for r in Role]
B200, SM100 = "NVIDIA B200", "sm_100"


@dataclass
class Jobs:
    """Rerun jobs requested so far: (run, job id, nonce)."""

    items: list[tuple[str, str, str]] = field(default_factory=list)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now
        self.start = now

    def __call__(self) -> datetime:
        return self.now


# ---------------------------------------------------------------------------------- actions

# Biased towards what admission accepts, so that most sequences build real state (runs,
# keys, jobs) for the odd statements to be judged against.
offsets = st.sampled_from(
    [timedelta(0)] * 6
    + [
        timedelta(seconds=-1),
        timedelta(minutes=-10),
        timedelta(days=-400),
        timedelta(minutes=4),
        timedelta(minutes=6),
        timedelta(days=30),
    ]
)
ANYONE = ["admin", "ingester", "k0", "k1", "k2", "k3", "k4", "stranger"]


def signers_for(*likely: str) -> st.SearchStrategy[str]:
    """Mostly the keys that may sign this, sometimes anyone."""
    return st.sampled_from([*likely, *likely, *likely, *ANYONE])


subjects = st.sampled_from(["k0", "k1", "k2", "k3", "k4", "ingester", "admin"])
role_lists = st.one_of(
    st.lists(st.sampled_from(ROLES), min_size=1, max_size=3),
    st.just(["attester"]),
    st.just(["agent"]),
    st.just(["attester", "attester"]),
)
shapes = st.sampled_from(["plain"] * 12 + ["cosigned", "junk-sig", "relabelled", "resubmitted"])

register = st.fixed_dictionaries(
    {
        "kind": st.just("register"),
        "subject": subjects,
        "signer": st.one_of(st.just("self"), signers_for("admin")),
        "roles": role_lists,
        "valid_from": offsets,
        "valid_until": st.one_of(st.none(), offsets),
        "issued": offsets,
        "label": st.sampled_from([None, "ok", "bad\u202elabel"]),
    }
)
revoke = st.fixed_dictionaries(
    {
        "kind": st.just("revoke"),
        "subject": subjects,
        "signer": st.one_of(st.just("self"), signers_for("admin")),
    }
)
runs = st.sampled_from([RUNS[0], RUNS[0], *RUNS])
ingest = st.fixed_dictionaries(
    {
        "kind": st.just("ingest"),
        "run": runs,
        "signer": signers_for("ingester"),
        "issued": offsets,
    }
)
attest = st.fixed_dictionaries(
    {
        "kind": st.just("attest"),
        "run": runs,
        "signer": signers_for("k0", "k2"),
        "issued": offsets,
        "body": st.sampled_from(["same", "same", "another", "\u2066hidden"]),
    }
)
lifecycle = st.fixed_dictionaries(
    {
        "kind": st.just("lifecycle"),
        "run": runs,
        "signer": signers_for("admin"),
        "action": st.sampled_from(["retract", "supersede"]),
    }
)
request = st.fixed_dictionaries(
    {"kind": st.just("request"), "run": runs, "signer": signers_for("admin")}
)
claim = st.fixed_dictionaries(
    {
        "kind": st.just("claim"),
        "signer": signers_for("k1"),
        "gpu": st.sampled_from(["a", "b"]),
        "issued": offsets,
    }
)
result = st.fixed_dictionaries(
    {
        "kind": st.just("result"),
        "signer": signers_for("k1"),
        "gpu": st.sampled_from(["a", "b"]),
        "correct": st.booleans(),
        "consistent": st.sampled_from([True, True, True, False]),
    }
)
# A whole rerun: requested, claimed, answered (mostly from the claimed GPU, consistently).
rerun = st.fixed_dictionaries(
    {
        "kind": st.just("rerun"),
        "run": runs,
        "gpu": st.sampled_from(["a", "b"]),
        "answer_gpu": st.sampled_from(["same", "same", "same", "other"]),
        "correct": st.booleans(),
        "consistent": st.sampled_from([True, True, True, False]),
        "issued": offsets,
    }
)
actions = st.lists(
    st.tuples(
        st.one_of(
            register, revoke, ingest, attest, attest, lifecycle, request, claim, result, rerun
        ),
        shapes,
        st.sampled_from(
            [timedelta(0)] * 3 + [timedelta(seconds=1), timedelta(minutes=7), timedelta(hours=2)]
        ),
    ),
    min_size=1,
    max_size=14,
)

# One by one, or in groups through append_many (the group writer's path).
grouping = st.one_of(st.none(), st.lists(st.integers(1, 5), min_size=1, max_size=10))


# ------------------------------------------------------------------------------- the world


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An upgraded empty SQLite database, copied for each example (no schema step each)."""
    path = tmp_path_factory.mktemp("property") / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


class World:
    def __init__(self, db_url: str, *, worker: bool = False, like: World | None = None) -> None:
        """``worker``: each envelope is sent as a server's worker sends it (its stateless
        checks made with the key book, over the wire, its refusals answered by the worker).
        ``like``: the same keys and clock as that world, so the same script signs the very
        same envelopes."""
        self.worker = worker
        self.clock = Clock(like.clock.start if like else utc_now().replace(microsecond=0))
        self.clock.start = self.clock.now
        if like is not None:
            self.keys = dict(like.keys)
        else:
            self.keys = {name: SigningKey.generate() for name in ("admin", "ingester", "log")}
            self.keys |= {f"k{i}": SigningKey.generate() for i in range(KEYS)}
            self.keys["stranger"] = SigningKey.generate()
        self.root = TrustRoot(
            "test.kernelindex/property",
            (self.keys["admin"].public,),
            self.keys["log"].public,
            format_time(self.clock.now),
        )
        self.db_url = db_url
        self.ledger = Ledger(db_url, self.root, clock=self.clock, log_key=self.keys["log"])
        ArtifactStore(self.ledger.store).put_many(ARTIFACTS)  # what the runs' jobs name
        self.jobs = Jobs()
        self.last: dict[str, Any] | None = None  # the last envelope admitted
        admin, ingester = self.keys["admin"], self.keys["ingester"]
        k0, k1 = self.keys["k0"], self.keys["k1"]
        for envelope in (  # the prelude: an attester, an agent, one run
            _registration(admin, admin, ["admin"], self.clock.now),
            _registration(ingester, admin, ["ingester"], self.clock.now),
            _registration(k0, k0, ["attester"], self.clock.now),
            _registration(k1, admin, ["agent"], self.clock.now),
            ingestion_envelope(MANIFESTS[RUNS[0]], ingester, now=self.clock.now),
        ):
            self.ledger.append(envelope)

    def count(self) -> int:
        return int(self.ledger.store.last_position())

    def key(self, name: str, subject: str | None = None) -> SigningKey:
        return self.keys[subject if name == "self" and subject else name]


def _registration(
    subject: SigningKey,
    signer: SigningKey,
    roles: list[str],
    valid_from: datetime,
    *,
    issued: datetime | None = None,
    valid_until: datetime | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """A key registration with exactly these roles and window (the authoring helper sorts
    and fills in for you; an attacker does not)."""
    predicate: dict[str, Any] = {
        "action": "register",
        "keyId": subject.key_id,
        "publicKey": subject.public.b64,
        "roles": roles,
        "validFrom": format_time(valid_from),
        "issuedAt": format_time(issued or valid_from),
    }
    if valid_until is not None:
        predicate["validUntil"] = format_time(valid_until)
    if label is not None:
        predicate["label"] = label
    if "agent" in roles:  # an agent key names the GPU it measures on (issue 32)
        predicate["devices"] = [{"backend": "cuda", "product": B200, "architecture": SM100}]
    statement = make_statement(subject.key_id, subject.key_id, PredicateType.KEY, predicate)
    return sign_envelope(statement, signer)


def _device(gpu: str) -> dict[str, str]:
    return {"product": B200, "architecture": SM100, "gpuUuidHash": gpu * 64, "backend": "cuda"}


def build(w: World, action: dict[str, Any]) -> dict[str, Any] | None:
    """The envelope an action asks for (None: nothing to send, e.g. no job yet)."""
    now = w.clock.now
    kind = action["kind"]
    if kind == "register":
        subject = w.keys[action["subject"]]
        signer = w.key(action["signer"], action["subject"])
        until = action["valid_until"]
        return _registration(
            subject,
            signer,
            action["roles"],
            now + action["valid_from"],
            issued=now + action["issued"],
            valid_until=now + until if until is not None else None,
            label=action["label"],
        )
    if kind == "revoke":
        subject = w.keys[action["subject"]]
        return key_revocation_envelope(
            subject.public, w.key(action["signer"], action["subject"]), now=now
        )
    signer = w.keys[action["signer"]]
    if kind == "ingest":
        return ingestion_envelope(MANIFESTS[action["run"]], signer, now=now + action["issued"])
    if kind == "attest":
        run = action["run"]
        # As given: a generated body may carry what admission refuses (a hostile client's).
        note = {
            "type": "note",
            "body": action["body"],
            "issuedAt": format_time(now + action["issued"]),
        }
        return signed_as_given(NAMES[run], run, PredicateType.ATTESTATION, note, signer)
    if kind == "lifecycle":
        run = action["run"]
        other = next(r for r in RUNS if r != run)
        return lifecycle_envelope(
            run,
            NAMES[run],
            signer,
            action=action["action"],
            reason="property",
            superseded_by=other if action["action"] == "supersede" else None,
            now=now,
        )
    if kind == "request":
        run = action["run"]
        envelope = rerun_request_envelope(
            run,
            NAMES[run],
            signer,
            artifact_digest=str(rerun_artifacts(MANIFESTS[run]).solution),
            workload_digest=str(rerun_artifacts(MANIFESTS[run]).workload),
            product=B200,
            architecture=SM100,
            expires_at=now + timedelta(hours=3),
            now=now,
        )
        predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
        w.jobs.items.append((run, predicate["jobId"], predicate["nonce"]))
        return envelope
    if not w.jobs.items:
        return None
    run, job_id, nonce = w.jobs.items[-1]
    if kind == "claim":
        return rerun_claim_envelope(
            run,
            NAMES[run],
            signer,
            job_id=job_id,
            device=_device(action["gpu"]),
            now=now + action["issued"],
        )
    from tests.projections.projection_world import Job

    value = rerun_result(
        Job(run, job_id, nonce, B200, SM100), correct=action["correct"], gpu_hash=action["gpu"] * 64
    )
    if not action["consistent"]:
        value["summary"]["allCorrect"] = not value["summary"]["allCorrect"]
    return unchecked_rerun_envelope(run, NAMES[run], signer, result=value, now=now)


def reshape(w: World, envelope: dict[str, Any], shape: str) -> dict[str, Any]:
    """An attacker's variations on the envelope's signatures."""
    if shape == "cosigned":
        other = w.keys["k0"]
        payload = base64.b64decode(envelope["payload"])
        sig = other.sign(pae(envelope["payloadType"], payload))
        extra = {"keyid": other.key_id, "sig": base64.b64encode(sig).decode()}
        return envelope | {"signatures": [extra, *envelope["signatures"]]}
    if shape == "junk-sig":
        keyid = envelope["signatures"][0]["keyid"]
        return envelope | {
            "signatures": [{"keyid": keyid, "sig": base64.b64encode(b"\1" * 64).decode()}]
        }
    if shape == "relabelled":
        bad = copy.deepcopy(envelope)
        bad["signatures"][0]["keyid"] = w.keys["k1"].key_id
        return bad
    if shape == "resubmitted" and w.last is not None:
        return w.last  # someone else's (or our own) admitted envelope, sent again
    return envelope


def expand(script: list[tuple[dict[str, Any], str, timedelta]]) -> list[tuple[Any, str, Any]]:
    """A whole rerun becomes its request, claim and result (by the prelude's agent)."""
    out: list[tuple[Any, str, Any]] = []
    for action, shape, step in script:
        if action["kind"] != "rerun":
            out.append((action, shape, step))
            continue
        other = "b" if action["gpu"] == "a" else "a"
        answer = action["gpu"] if action["answer_gpu"] == "same" else other
        out += [
            ({"kind": "request", "run": action["run"], "signer": "admin"}, "plain", step),
            (
                {"kind": "claim", "signer": "k1", "gpu": action["gpu"], "issued": action["issued"]},
                "plain",
                timedelta(0),
            ),
            (
                {
                    "kind": "result",
                    "signer": "k1",
                    "gpu": answer,
                    "correct": action["correct"],
                    "consistent": action["consistent"],
                },
                shape,
                timedelta(seconds=30),
            ),
        ]
    return out


def play(
    w: World,
    script: list[tuple[dict[str, Any], str, timedelta]],
    groups: list[int] | None = None,
    skip: frozenset[int] = frozenset(),
) -> list[str]:
    """Send the script's envelopes one by one, or (``groups``) in groups of those sizes
    through ``append_many``, as the API's group writer does: later envelopes of a group see
    what earlier ones did (a key registered, then used). The envelopes numbered in ``skip``
    (in the order built) are built but not sent."""
    outcomes: list[str] = []
    pending: list[tuple[str, dict[str, Any]]] = []
    sizes = iter(groups or [])
    want = next(sizes, 1)
    built = -1
    for action, shape, step in expand(script):
        w.clock.now += step
        envelope = build(w, action)
        if envelope is None:
            continue
        built += 1
        if built in skip:
            continue
        pending.append((action["kind"], reshape(w, envelope, shape)))
        if len(pending) >= want:
            outcomes += _send(w, pending)
            pending, want = [], next(sizes, 1)
    if pending:
        outcomes += _send(w, pending)
    return outcomes


def _send(w: World, group: list[tuple[str, dict[str, Any]]]) -> list[str]:
    before = w.count()
    results = (
        _through_worker(w, [e for _, e in group])
        if w.worker
        else w.ledger.append_many([envelope for _, envelope in group])
    )
    new = 0
    outcomes = []
    for (kind, envelope), result in zip(group, results, strict=True):
        if isinstance(result, DomainError):
            outcomes.append(f"{kind}:{result.code}")
            continue
        if not result.duplicate:
            new += 1
            w.last = envelope
        outcomes.append(f"{kind}:{'duplicate' if result.duplicate else 'ok'}")
    assert w.count() == before + new, "a refused envelope appended something"
    return outcomes


def _through_worker(w: World, envelopes: list[dict[str, Any]]) -> list[Any]:
    """What ``kernelindex serve`` does with a group: each envelope checked in a worker
    (``LedgerService._stateless``), those it refuses answered there, the rest sent to the
    writer as encoded over its socket (``ledger.checked_wire``)."""
    keys = KnownKeys(w.ledger.key_states)
    results: list[Any] = []
    sent: list[tuple[int, object]] = []
    for envelope in envelopes:
        try:
            checked = check_stateless(envelope, keys)
        except DomainError as exc:
            results.append(exc)
            continue
        refusal = checked.refusal()
        results.append(refusal)
        if refusal is None:
            sent.append((len(results) - 1, over_the_wire(checked)))
    for (at, _), result in zip(sent, w.ledger.append_many([c for _, c in sent]), strict=True):
        results[at] = result
    return results


def assert_everything_verifies(w: World) -> None:
    """What the ledger admitted re-verifies everywhere, against the pinned trust root."""
    report = audit_ledger(w.ledger)
    assert report.verified, report.findings
    policy = VerificationPolicy(trust_root=w.root)
    for digest, _ in w.ledger.run_index():
        assert all(h.ok for h in run_history(w.ledger, digest)), digest
        out = io.StringIO()
        export_runs(w.ledger, out, [digest])
        bundle = verify_bundle_lines(out.getvalue().splitlines(), policy, workers=1)
        assert outcome_of(bundle) is Outcome.VERIFIED, (digest, bundle.findings)
    for key_id in w.ledger.key_ids():
        assert all(h.ok for h in key_history(w.ledger, key_id)), key_id
    whole = io.StringIO()
    export_runs(w.ledger, whole, None)
    bundle = verify_bundle_lines(whole.getvalue().splitlines(), policy, workers=1)
    assert outcome_of(bundle) is Outcome.VERIFIED, bundle.findings


def fresh(
    template: Path, tmp_path: Path, n: int, *, worker: bool = False, like: World | None = None
) -> World:
    path = tmp_path / f"ledger-{n}.db"
    shutil.copy(template, path)
    return World(f"sqlite:///{path}", worker=worker, like=like)


_counter = iter(range(10**9))


def check_property(
    w: World,
    script: list[tuple[dict[str, Any], str, timedelta]],
    groups: list[int] | None = None,
) -> list[str]:
    try:
        outcomes = play(w, script, groups)
        assert_everything_verifies(w)
    finally:
        w.ledger.close()
    return outcomes


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=actions, groups=grouping)
def test_every_admitted_envelope_reverifies_and_every_refused_one_appends_nothing(
    template: Path,
    tmp_path: Path,
    script: list[tuple[dict[str, Any], str, timedelta]],
    groups: list[int] | None,
) -> None:
    check_property(fresh(template, tmp_path, next(_counter)), script, groups)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=actions, groups=grouping)
def test_a_servers_workers_checks_change_no_outcome(
    template: Path,
    tmp_path: Path,
    script: list[tuple[dict[str, Any], str, timedelta]],
    groups: list[int] | None,
) -> None:
    """The stateless checks made in a worker (``ledger.admission_checks``), its refusals
    answered there and its signature verdicts taken by the writer: every envelope gets the
    answer the writer alone gives it (same code, or both admitted), and the property holds."""
    alone = fresh(template, tmp_path, next(_counter))
    workers = fresh(template, tmp_path, next(_counter), worker=True, like=alone)
    expected = check_property(alone, script, groups)
    assert check_property(workers, script, groups) == expected


@pytest.mark.slow
@settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=actions, groups=grouping)
def test_the_property_at_length(
    template: Path,
    tmp_path: Path,
    script: list[tuple[dict[str, Any], str, timedelta]],
    groups: list[int] | None,
) -> None:
    check_property(fresh(template, tmp_path, next(_counter)), script, groups)


# --------------------------------------------------------------------------- regressions


def _a(kind: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, **fields}


def _registered(subject: str, signer: str, roles: list[str]) -> tuple[Any, str, timedelta]:
    return (
        _a(
            "register",
            subject=subject,
            signer=signer,
            roles=roles,
            valid_from=timedelta(0),
            valid_until=None,
            issued=timedelta(0),
            label=None,
        ),
        "plain",
        timedelta(0),
    )


OTHER = RUNS[1]  # the prelude ingested RUNS[0] and registered k0 (attester), k1 (agent)
REGRESSIONS: dict[str, tuple[list[tuple[Any, str, timedelta]], list[str]]] = {
    # Issue 13 §1, as filed: a self-registration with its role twice (a set at admission, a
    # list at re-verification) ...
    "duplicated-role": (
        [
            _registered("k3", "self", ["attester", "attester"]),
            (
                _a("attest", run=SEED, signer="k3", issued=timedelta(0), body="same"),
                "plain",
                timedelta(0),
            ),
        ],
        ["register:schema-violation", "attest:unknown-key"],
    ),
    # ... and one co-signed by another attester (k0) listed first.
    "co-signed-self-registration": (
        [(_registered("k3", "self", ["attester"])[0], "cosigned", timedelta(0))],
        ["register:malformed-envelope"],
    ),
    # A statement sent again after its key was revoked is the event it already is; a new
    # one by the revoked key is refused.
    "resubmitted-after-revocation": (
        [
            _registered("k3", "self", ["attester"]),
            (
                _a("attest", run=SEED, signer="k3", issued=timedelta(0), body="same"),
                "plain",
                timedelta(seconds=1),
            ),
            (_a("revoke", subject="k3", signer="self"), "plain", timedelta(seconds=1)),
            (_a("revoke", subject="k3", signer="self"), "resubmitted", timedelta(seconds=1)),
            (
                _a("attest", run=SEED, signer="k3", issued=timedelta(0), body="another"),
                "plain",
                timedelta(0),
            ),
        ],
        ["register:ok", "attest:ok", "revoke:ok", "revoke:duplicate", "attest:revoked-key"],
    ),
    # A rerun result from another GPU than the claim named, and one whose summary lies.
    "rerun-device-and-summary": (
        [
            (_a("request", run=SEED, signer="admin"), "plain", timedelta(0)),
            (_a("claim", signer="k1", gpu="a", issued=timedelta(0)), "plain", timedelta(0)),
            (
                _a("result", signer="k1", gpu="b", correct=True, consistent=True),
                "plain",
                timedelta(0),
            ),
            (
                _a("result", signer="k1", gpu="a", correct=False, consistent=False),
                "plain",
                timedelta(0),
            ),
            (
                _a("result", signer="k1", gpu="a", correct=True, consistent=True),
                "plain",
                timedelta(0),
            ),
        ],
        ["request:ok", "claim:ok", "result:rerun-rejected", "result:schema-violation", "result:ok"],
    ),
    # A stale claim, re-posted by someone after the agent let it lapse.
    "stale-claim": (
        [
            (_a("request", run=SEED, signer="admin"), "plain", timedelta(minutes=15)),
            (
                _a("claim", signer="k1", gpu="a", issued=timedelta(minutes=-10)),
                "plain",
                timedelta(0),
            ),
            (_a("claim", signer="k1", gpu="a", issued=timedelta(0)), "plain", timedelta(0)),
            (
                _a("claim", signer="k1", gpu="a", issued=timedelta(0)),
                "resubmitted",
                timedelta(hours=2),
            ),
        ],
        ["request:ok", "claim:bad-timestamp", "claim:ok", "claim:duplicate"],
    ),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regressions_on_both_backends(name: str, db_url: str) -> None:
    script, expected = REGRESSIONS[name]
    assert check_property(World(db_url), script) == expected
