"""A ledger world for the projection tests: keys, trust root, a controllable clock, the SOL
056 demo cohort, rerun jobs and agent results, and what the views say.

Not a test module: the test files of this folder import it (``from projection_world import``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import resources
from typing import Any

from sqlalchemy import select

from domain.errors import DomainError
from domain.importers.records import (
    Artifact,
    referencing,
    rerun_artifacts,
    workload_artifact,
)
from domain.importers.sol_execbench import map_definition
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.manifest_set import check_manifest_set
from domain.ranking import View
from domain.rerun_binding import DeviceClass
from domain.run_facts import comparison_key_of
from domain.statements import Role
from domain.timestamps import format_time, utc_now
from ledger.application import Ledger
from ledger.receipt import Receipt
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
    lifecycle_envelope,
    rerun_claim_envelope,
    rerun_request_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store.artifacts import ArtifactStore
from ledger.store.schema import upgrade
from projections import queries, view_reads
from projections.rows import RunRow
from projections.runner import ProjectionRunner
from projections.tables import ranks, runs
from tests.unchecked_signing import unchecked_rerun_envelope

B200, SM100 = "NVIDIA B200", "sm_100"
# Keys are registered (valid from) a day before the tests' clocks start.
BASE_TIME = utc_now().replace(microsecond=0) - timedelta(days=1)


def _demo(name: str) -> Any:
    return json.loads(resources.files("api.demo_data").joinpath(name).read_text("utf-8"))


_COHORT = _demo("sol-056-cohort.json")
_BENCHMARK = _COHORT["cohort"][0]["run"]["spec"]["sourceNative"]["benchmark"]


def _workload_source() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A SOL-ExecBench definition of the demo's benchmark, with one workload entry per case
    of the demo's suite (its axes, its id): what an agent runs for any of the world's runs."""
    cases = _COHORT["seedWorkload"]["spec"]["cases"]
    tensor = ["batch_size", "seq_len", "hidden_size"]
    definition = {
        "name": _BENCHMARK,
        "op_type": "decoder_layer_backward",
        "axes": {axis: {"type": "var"} for axis in cases[0]["axes"]},
        "inputs": {"hidden_states": {"shape": tensor, "dtype": "bfloat16"}},
        "outputs": {"grad_hidden_states": {"shape": tensor, "dtype": "bfloat16"}},
        "reference": "def run(hidden_states):\n    return hidden_states\n",
    }
    return definition, [{"uuid": case["externalId"], "axes": case["axes"]} for case in cases]


_DEFINITION, _WORKLOADS = _workload_source()
# The world's workload, mapped from the artifact by the importer's own mapping: the artifact
# rebuilds the runs' workload digest by construction (domain.rerun_binding).
_MAPPED = map_definition(_DEFINITION, _WORKLOADS)
assert _MAPPED.suite is not None and not _MAPPED.problems
WORKLOAD_ARTIFACT = workload_artifact(_DEFINITION, _WORKLOADS)
_WORKLOAD = referencing(_MAPPED.suite, WORKLOAD_ARTIFACT)


def _seed_manifests() -> dict[str, Any]:
    """The demo's seed run with an implementation manifest of its own (the demo names its
    implementation by digest only, and a run that names no code cannot be rerun)."""
    seed = copy.deepcopy(_demo("run-38823.manifest.json"))
    implementation = copy.deepcopy(_COHORT["cohort"][0]["implementation"])
    implementation["spec"]["projectRevision"] = {"version": "submission-38823"}
    implementation["metadata"] = {"name": "sol-submission-38823"}
    return seed | {"implementation": implementation}


def _rerunnable(manifests: dict[str, Any]) -> tuple[dict[str, Any], list[Artifact]]:
    """The demo run bound by its digests to code an agent can fetch: its implementation pins
    a solution artifact of its own (``spec.source.contentDigest``) and its workload is the
    world's (mapped from the shared workload artifact); the run names both by digest. Returns
    the manifests and the solution artifact, which the world stores."""
    name = manifests["run"]["metadata"]["name"]
    solution = Artifact(
        json.dumps(
            {
                "name": name,
                "definition": _BENCHMARK,
                "sources": [{"path": "k.py", "content": f"# {name}"}],
            }
        ).encode(),
        "application/json",
        "solution.json",
    )
    implementation = copy.deepcopy(manifests["implementation"])
    implementation["spec"]["operation"] = {"specDigest": _MAPPED.operation_digest}
    implementation["spec"]["source"] = {
        "contentDigest": solution.digest,
        "fileName": "solution.json",
        "sizeBytes": len(solution.content),
    }
    run = copy.deepcopy(manifests["run"])
    run["spec"]["workloadDigest"] = _MAPPED.suite_digest
    run["spec"]["implementationDigest"] = manifest_digest(implementation)
    named = manifests | {"run": run, "implementation": implementation, "workload": _WORKLOAD}
    return named, [solution]


_RUNS = [_rerunnable(m) for m in (_seed_manifests(), *_COHORT["cohort"])]
SEED, RUN_15149, RUN_21613, RUN_36818 = (check_manifest_set(m).run_digest for m, _ in _RUNS)
ALL_RUNS = (SEED, RUN_15149, RUN_21613, RUN_36818)
MANIFESTS: dict[str, dict[str, Any]] = {d: m for d, (m, _) in zip(ALL_RUNS, _RUNS, strict=True)}
# The comparison group of the seed, 21613 and 36818 (stack v1.1; 15149 ran v1.0: a group alone).
GROUP = str(comparison_key_of(MANIFESTS[SEED]))
assert {comparison_key_of(MANIFESTS[r]) for r in (RUN_21613, RUN_36818)} == {GROUP}
# What an agent fetches for each run's jobs, stored in every world's ledger.
ARTIFACTS: list[Artifact] = [WORKLOAD_ARTIFACT, *(a for _, found in _RUNS for a in found)]
NAMES = {
    SEED: "sol-submission-38823",
    RUN_15149: "sol-submission-15149",
    RUN_21613: "sol-submission-21613",
    RUN_36818: "sol-submission-36818",
}
CLAIMED = {SEED: 1750693.0, RUN_15149: 1463550.0, RUN_21613: 1499085.0, RUN_36818: 1541431.0}
# The device classes every world's agent keys are registered for: GPUs of either product
# and architecture (a result on the wrong one is then refused for the job's requirements).
AGENT_DEVICES = tuple(
    DeviceClass("cuda", product, arch)
    for product in (B200, "NVIDIA H100")
    for arch in (SM100, "sm_90")
)


class Clock:
    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or utc_now()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


@dataclass(frozen=True)
class Keys:
    """Every key a world uses; the same Keys give the same trust root and registrations."""

    admin: SigningKey
    ingester: SigningKey
    attester: SigningKey
    log: SigningKey
    agents: tuple[SigningKey, ...]

    @classmethod
    def generate(cls, agents: int = 2) -> Keys:
        return cls(
            *(SigningKey.generate() for _ in range(4)),
            tuple(SigningKey.generate() for _ in range(agents)),
        )


@dataclass(frozen=True)
class Job:
    run: str
    job_id: str
    nonce: str
    product: str
    architecture: str


def gpu(n: int) -> str:
    """A hashed GPU UUID (64 hex)."""
    return f"{n:064x}"


def rerun_result(
    job: Job,
    *,
    correct: bool = True,
    ns: float | None = None,
    gpu_hash: str | None = None,
    product: str | None = None,
    architecture: str | None = None,
    nonce: str | None = None,
    job_id: str | None = None,
    ci95: list[float] | None = None,
) -> dict[str, Any]:
    """A rerun/v1 result for ``job``; by default correct and 1.02 × the claim (mean and median)."""
    value = ns if ns is not None else round(CLAIMED[job.run] * 1.02)
    samples = [value * (1 + 0.002 * (i - 3)) for i in range(7)]
    return {
        "jobId": job_id or job.job_id,
        "nonce": nonce or job.nonce,
        "cases": [
            {"case": "case-0", "status": "passed"},
            {"case": "case-1", "status": "passed" if correct else "incorrect"},
        ],
        "summary": {
            "allCorrect": correct,
            "medianNs": value,
            "meanNs": value,
            "ci95Ns": ci95 if ci95 is not None else [min(samples), max(samples)],
            "samples": len(samples),
            "samplesNs": samples,
        },
        "environment": {
            "product": product or job.product,
            "architecture": architecture or job.architecture,
            "gpuUuidHash": gpu_hash or gpu(1),
            "backend": "cuda",
        },
        "calibration": {},
    }


@dataclass
class World:
    db_url: str
    keys: Keys
    clock: Clock
    ledger: Ledger
    root: TrustRoot
    jobs: list[Job] = field(default_factory=list)

    @classmethod
    def create(cls, db_url: str, keys: Keys | None = None, clock: Clock | None = None) -> World:
        """A fresh ledger with the admin, an ingester, an attester and the agents registered
        (the agents admin-signed with role agent)."""
        keys = keys or Keys.generate()
        clock = clock or Clock()
        root = TrustRoot(
            origin="test.kernelindex/log",
            admin_keys=(keys.admin.public,),
            log_key=keys.log.public,
            created_at=format_time(BASE_TIME),
        )
        upgrade(db_url)  # idempotent: a database from the db_url fixture already has it
        world = cls(db_url, keys, clock, Ledger(db_url, root, clock=clock), root)
        ArtifactStore(world.ledger.store).put_many(ARTIFACTS)
        for envelope in world.key_envelopes():
            world.ledger.append(envelope)
        return world

    def key_envelopes(self) -> list[dict[str, Any]]:
        k, at = self.keys, self.clock.now
        return [
            key_registration_envelope(k.admin.public, [Role.ADMIN], k.admin, now=at),
            key_registration_envelope(k.ingester.public, [Role.INGESTER], k.admin, now=at),
            key_registration_envelope(k.attester.public, [Role.ATTESTER], k.attester, now=at),
            *(
                key_registration_envelope(
                    a.public, [Role.AGENT], k.admin, now=at, label=f"a{i}", devices=AGENT_DEVICES
                )
                for i, a in enumerate(k.agents)
            ),
        ]

    def close(self) -> None:
        self.ledger.close()

    # ------------------------------------------------------------ writes

    def count(self) -> int:
        return int(self.ledger.store.last_position())

    def append(self, envelope: dict[str, Any]) -> Receipt:
        return self.ledger.append(envelope)

    def ingest_envelope(self, run: str) -> dict[str, Any]:
        return ingestion_envelope(MANIFESTS[run], self.keys.ingester, now=self.clock.now)

    def ingest(self, *which: str) -> list[str]:
        return [self.append(self.ingest_envelope(r)).subject_digest for r in which or ALL_RUNS]

    def attest_envelope(self, run: str, body: str, type_: str = "note") -> dict[str, Any]:
        return attestation_envelope(
            run, NAMES[run], self.keys.attester, type_=type_, body=body, now=self.clock.now
        )

    def lifecycle_envelope(
        self, run: str, action: str, superseded_by: str | None = None
    ) -> dict[str, Any]:
        return lifecycle_envelope(
            run,
            NAMES[run],
            self.keys.admin,
            action=action,
            reason=f"{action} in a test",
            superseded_by=superseded_by,
            now=self.clock.now,
        )

    def request_envelope(
        self,
        run: str,
        *,
        product: str = B200,
        architecture: str = SM100,
        expires_in: timedelta = timedelta(hours=1),
        job_id: str | None = None,
        nonce: str | None = None,
    ) -> tuple[Job, dict[str, Any]]:
        job = Job(
            run,
            job_id or str(uuid.uuid4()),
            nonce or uuid.uuid4().hex + uuid.uuid4().hex,
            product,
            architecture,
        )
        code = rerun_artifacts(MANIFESTS[run])  # the run's own: the only code a job may name
        assert code.solution is not None and code.workload is not None
        envelope = rerun_request_envelope(
            run,
            NAMES[run],
            self.keys.admin,
            artifact_digest=code.solution,
            workload_digest=code.workload,
            product=product,
            architecture=architecture,
            expires_at=self.clock.now + expires_in,
            job_id=job.job_id,
            nonce=job.nonce,
            now=self.clock.now,
        )
        return job, envelope

    def request_rerun(self, run: str, **kwargs: Any) -> Job:
        job, envelope = self.request_envelope(run, **kwargs)
        self.append(envelope)
        self.jobs.append(job)
        return job

    def claim_envelope(
        self, job: Job, signer: SigningKey, device: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """The agent's claim on the job, on the hardware the job requires (or ``device``)."""
        return rerun_claim_envelope(
            job.run,
            NAMES[job.run],
            signer,
            job_id=job.job_id,
            device=device
            or {
                "product": job.product,
                "architecture": job.architecture,
                "gpuUuidHash": "c" * 64,
                "backend": "cuda",
            },
            now=self.clock.now,
        )

    def claim(self, job: Job, signer: SigningKey, device: dict[str, str] | None = None) -> None:
        """Claim before posting a result (a refusal is left to the result's own admission to
        report, e.g. a key without the agent role)."""
        with contextlib.suppress(DomainError):
            self.append(self.claim_envelope(job, signer, device))

    def result_envelope(
        self, job: Job, signer: SigningKey | None = None, *, claim: bool = True, **kwargs: Any
    ) -> dict[str, Any]:
        """The agent's result; claimed first (by default) on the device the result names."""
        result = rerun_result(job, **kwargs)
        if claim:
            # On the hardware the job requires, with the GPU the result names: a result on
            # other hardware is then refused for the job's requirements, not for the claim.
            device = {
                "product": job.product,
                "architecture": job.architecture,
                "gpuUuidHash": result["environment"]["gpuUuidHash"],
                "backend": "cuda",
            }
            self.claim(job, signer or self.keys.agents[0], device)
        return unchecked_rerun_envelope(
            job.run,
            NAMES[job.run],
            signer or self.keys.agents[0],
            result=result,
            now=self.clock.now,
        )

    # ------------------------------------------------------------ reads

    def runner(self) -> ProjectionRunner:
        return ProjectionRunner(self.ledger)

    def views(self) -> dict[str, str]:
        """Catch up, then the digest of every view table."""
        runner = self.runner()
        runner.catch_up()
        return runner.table_digests()

    def row(self, run: str) -> RunRow:
        self.runner().catch_up()
        with self.ledger.store.transaction(commit=False) as session:
            row = queries.run_row(session, run)
        assert row is not None, f"{run} is not in the runs view"
        return row

    def level(self, run: str) -> str:
        return self.row(run).evidence_level

    def levels(self) -> dict[str, str]:
        with self.ledger.store.transaction(commit=False) as session:
            return {
                r.run_digest: r.evidence_level
                for r in session.execute(select(runs.c.run_digest, runs.c.evidence_level))
            }

    def board(
        self, view: View = View.SOURCE_NATIVE, key: str = GROUP
    ) -> list[tuple[str, int, int]]:
        """(run, rank, of) of a leaderboard, best first."""
        self.runner().catch_up()
        with self.ledger.store.transaction(commit=False) as session:
            rows = view_reads.leaderboard(queries.rows_of(session), key, view)
        return [(r.run_digest, r.rank, r.of_count) for r in rows]

    def standing(self, run: str, view: View = View.SOURCE_NATIVE) -> tuple[int, int] | None:
        self.runner().catch_up()
        with self.ledger.store.transaction(commit=False) as session:
            found = queries.standings(session, run).get(str(view))
        return None if found is None else (found.rank, found.of)

    def tracking_position(self) -> int:
        from projections.tables import tracking

        with self.ledger.store.transaction(commit=False) as session:
            value = session.execute(select(tracking.c.position)).scalar()
        return int(value or 0)

    def position_free_views(self) -> dict[str, list[dict[str, Any]]]:
        """The views without what depends on where events sit in the log (positions, and the
        positions quoted in evidence reasons): equal for any interleaving of the same events."""
        dropped = {"ingested_position", "last_position", "evidence_caused_by"}
        out: dict[str, list[dict[str, Any]]] = {}
        with self.ledger.store.transaction(commit=False) as session:
            out["runs"] = [
                {
                    k: (_strip_positions(v) if k == "evidence_reasons" else v)
                    for k, v in r.items()
                    if k not in dropped
                }
                for r in session.execute(select(runs).order_by(runs.c.run_digest)).mappings()
            ]
            out["ranks"] = [
                dict(r)
                for r in session.execute(
                    select(ranks).order_by(ranks.c.view, ranks.c.run_digest)
                ).mappings()
            ]
        return out


def _strip_positions(reasons: str) -> str:
    return re.sub(r"positions? \d+( and \d+)?", "position N", reasons)
