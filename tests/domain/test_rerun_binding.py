"""Issue 32's two bindings as pure rules (domain.rerun_binding): a job measures its run's own
code, and an agent key measures only on the device classes its registration names. What
admission refuses, the evidence fold (and so the offline verifier) never counts."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import DomainError
from domain.event_names import EventName
from domain.evidence import EvidenceLevel
from domain.importers.records import (
    Artifact,
    ImportRecord,
    referencing,
    rerun_artifacts,
    workload_artifact,
)
from domain.importers.sol_execbench import map_sol_execbench
from domain.manifests.manifest_set import check_manifest_set
from domain.rerun_binding import (
    DeviceClass,
    check_agent_registration,
    counts_for_evidence,
    job_code_problem,
    may_measure,
    parse_device_class,
)
from domain.run_facts import RunFold
from domain.statements import KeyPredicate, PredicateType, StatementError, build_predicate
from domain.timestamps import parse_time
from ledger.authority.job_code import UnboundJobError, check_job_code
from ledger.authority.key_book import DeviceNotBoundError, check_device, registered_state
from ledger.signing.keys import SigningKey
from ledger.submission import PreparedSubmission, prepare_submission
from tests.paths import FIXTURES, REPO
from tests.projections.projection_world import (
    B200,
    MANIFESTS,
    SEED,
    SM100,
    Job,
    rerun_result,
)
from tests.sol_traces import traced_files

H100, SM90 = "NVIDIA H100", "sm_90"


def _registration(devices: list[dict[str, Any]] | None, roles: list[str] | None = None) -> Any:
    key = SigningKey.generate()
    fields: dict[str, Any] = {
        "action": "register",
        "keyId": key.key_id,
        "publicKey": key.public.b64,
        "roles": roles or ["agent"],
        "validFrom": "2026-01-01T00:00:00Z",
        "issuedAt": "2026-01-01T00:00:00Z",
    }
    if devices is not None:
        fields["devices"] = devices
    return build_predicate(PredicateType.KEY, fields)


# ------------------------------------------------------------------------- device classes


def test_device_classes_as_the_cli_spells_them() -> None:
    assert parse_device_class("NVIDIA B200/sm_100") == DeviceClass("cuda", B200, SM100)
    assert parse_device_class(" cpu-test ") == DeviceClass("cpu-test")
    assert parse_device_class("NVIDIA B200/sm_100").label() == "NVIDIA B200/sm_100"
    for bad in ("NVIDIA B200", "/sm_100", "B200/", "cuda", ""):
        with pytest.raises(DomainError, match="not a device class"):
            parse_device_class(bad)


@pytest.mark.parametrize(
    ("devices", "roles", "words"),
    [
        ([{"backend": "cuda", "product": B200}], None, "names product and architecture"),
        ([{"backend": "cpu-test", "product": B200}], None, "names no product"),
        ([{"backend": "rocm", "product": B200, "architecture": "gfx942"}], None, "unknown"),
        ([{"backend": "cpu-test"}, {"backend": "cpu-test"}], None, "twice"),
        (
            [{"backend": "cpu-test"}, {"backend": "cuda", "product": B200, "architecture": SM100}],
            None,
            "never both",
        ),
        ([{"backend": "cpu-test"}], ["attester"], "only an agent key"),
    ],
)
def test_a_registration_names_device_classes_only_as_the_rules_allow(
    devices: list[dict[str, Any]], roles: list[str] | None, words: str
) -> None:
    with pytest.raises(StatementError, match=words):
        _registration(devices, roles)


def test_an_agent_registration_without_device_classes_is_refused() -> None:
    predicate = _registration(None)
    assert isinstance(predicate, KeyPredicate)
    with pytest.raises(DomainError, match="names the device classes it may measure on"):
        check_agent_registration(predicate)
    check_agent_registration(_registration(None, ["attester"]))  # not an agent: nothing asked


def test_a_test_backend_class_admits_its_backend_and_never_counts() -> None:
    cpu = [DeviceClass("cpu-test")]
    assert may_measure(cpu, "CPU test backend (not a GPU)", "cpu", "cpu-test")
    assert may_measure(cpu, B200, SM100, "cpu-test")  # whatever it reports: it measures nothing
    assert not may_measure(cpu, B200, SM100, "cuda")
    assert not counts_for_evidence(cpu, B200, SM100, "cpu-test")
    gpu = [DeviceClass("cuda", B200, SM100)]
    assert may_measure(gpu, B200, SM100, "cuda") and counts_for_evidence(gpu, B200, SM100, "cuda")
    assert not may_measure(gpu, B200, SM90, "cuda") and not may_measure(gpu, H100, SM100, "cuda")
    assert not may_measure(gpu, B200, SM100, "cpu-test")


# ---------------------------------------------------------------------------- job code


def _prepared(folder: Path, solution: str = "solution.json") -> PreparedSubmission:
    files = {
        "definition.json": (folder / "definition.json").read_bytes(),
        "workload.jsonl": (folder / "workload.jsonl").read_bytes(),
        "solution.json": (folder / solution).read_bytes(),
    }
    return prepare_submission(files, latency_ns=CLAIMED_NS, product=B200, architecture=SM100)


# The run jobs are for (a direct submission: its implementation pins the solution, its
# workload artifact rebuilds its suite), and another run's code. The world's demo cohort
# names its code by references alone, which bind nothing.
CLAIMED_NS = 50_000
RMSNORM = FIXTURES / "sol-execbench" / "triton-rmsnorm"
OWN = _prepared(RMSNORM, "solution_triton.json")
OTHER = _prepared(REPO / "gpu_agent" / "samples" / "silu_and_mul_bf16")
RUN = OWN.run_digest
JOB = Job(RUN, "12345678-1234-4234-8234-123456789abc", "ab" * 32, B200, SM100)


def test_a_job_is_bound_only_to_the_code_its_run_names() -> None:
    own, other = rerun_artifacts(OWN.manifests), rerun_artifacts(OTHER.manifests)
    assert own.solution and own.workload and other.solution and other.workload
    assert job_code_problem(OWN.manifests, own.solution, own.workload) is None
    assert "is not the run's own" in str(
        job_code_problem(OWN.manifests, other.solution, own.workload)
    )
    assert "is not the run's own" in str(
        job_code_problem(OWN.manifests, own.solution, other.workload)
    )
    unnamed = copy.deepcopy(OWN.manifests)
    del unnamed["implementation"]
    assert "name no solution artifact" in str(job_code_problem(unnamed, own.solution, own.workload))


def test_a_reference_is_never_the_solution_only_the_pinned_source_is() -> None:
    """The world's seed naming its solution by a reference alone (its pinned source dropped),
    and a submission with a reference beside its pinned source contradict themselves: neither
    binds any job."""
    referenced = copy.deepcopy(MANIFESTS[SEED])
    del referenced["implementation"]["spec"]["source"]
    referenced["implementation"] = referencing(referenced["implementation"], OTHER.solution)
    seed = rerun_artifacts(referenced)
    assert seed.solution is None and seed.unpinned_solution == OTHER.solution.digest
    assert "not the source it pins" in str(
        job_code_problem(referenced, seed.unpinned_solution, str(seed.workload))
    )
    extra = copy.deepcopy(OWN.manifests)
    refs = extra["implementation"].setdefault("metadata", {}).setdefault("sourceRefs", [])
    refs.append({"url": "kernelindex:artifact/" + OTHER.solution.digest})
    assert check_manifest_set(extra).run_digest == RUN  # in no digest
    for asked in (OTHER.solution.digest, OWN.solution.digest):
        problem = job_code_problem(extra, asked, OWN.workload.digest)
        assert f"references the solution artifact {OTHER.solution.digest}" in str(problem)


def _fold(
    solution: str, workload: str, *, devices: frozenset[DeviceClass] | None = None, **env: str
) -> RunFold:
    """The seed folded with one request for this code and a passing result on ``env``."""
    fold = RunFold.ingested(1, RUN, {"source": "kernelindex", "manifests": OWN.manifests})
    if devices is not None:
        fold.devices_of = lambda _: devices
    request = {
        "jobId": JOB.job_id,
        "artifactDigest": solution,
        "workloadDigest": workload,
    }
    fold.apply(EventName.RUN_RERUN_REQUESTED, 2, "admin", request)
    result = rerun_result(JOB, ns=round(CLAIMED_NS * 1.02))
    result["environment"] |= env
    fold.apply(EventName.RUN_RERUN_RECORDED, 3, "agent", result)
    return fold


def test_the_evidence_policy_counts_a_result_only_for_a_job_bound_to_the_run() -> None:
    own, other = rerun_artifacts(OWN.manifests), rerun_artifacts(OTHER.manifests)
    assert own.solution and own.workload and other.solution and other.workload
    start = RunFold.ingested(1, RUN, {"source": "x", "manifests": OWN.manifests}).evidence
    bound = _fold(own.solution, own.workload)
    assert bound.evidence.level is EvidenceLevel.VERIFIED
    assert bound.measured == {3: (own.solution, own.workload)}
    for solution, workload in ((other.solution, own.workload), (own.solution, other.workload)):
        unbound = _fold(solution, workload)
        assert unbound.evidence == start and unbound.measured == {}
        assert not unbound.reruns[3].accepted


# ------------------------------------------------- admission and verifier agree on devices

PRODUCTS, ARCHS, BACKENDS = (B200, H100), (SM100, SM90), ("cuda", "cpu-test")
classes = st.one_of(
    st.sets(
        st.builds(DeviceClass, st.just("cuda"), st.sampled_from(PRODUCTS), st.sampled_from(ARCHS)),
        min_size=1,
        max_size=4,
    ),
    st.just({DeviceClass("cpu-test")}),
)


@settings(max_examples=200, deadline=None)
@given(
    devices=classes,
    product=st.sampled_from(PRODUCTS),
    architecture=st.sampled_from(ARCHS),
    backend=st.sampled_from(BACKENDS),
)
def test_admission_and_the_verifier_agree_on_what_a_key_may_measure(
    devices: set[DeviceClass], product: str, architecture: str, backend: str
) -> None:
    """Admission's check (on the key as its registration makes it) and the fold the
    verifier runs (reading the same registration): a result the verifier counts was one
    admission admits; one admission admits on a measuring backend and the run's hardware,
    the verifier counts."""
    registration = _registration([d.to_json() for d in devices])
    state = registered_state(
        registration, position=1, received_at=parse_time("2026-01-01T00:00:00Z"), signer="admin"
    )
    try:
        check_device(state, product, architecture, backend)
        admitted = True
    except DeviceNotBoundError:
        admitted = False
    own = rerun_artifacts(OWN.manifests)
    assert own.solution and own.workload
    fold = _fold(
        own.solution,
        own.workload,
        devices=state.devices,
        product=product,
        architecture=architecture,
        backend=backend,
    )
    counted = fold.evidence.level is EvidenceLevel.VERIFIED
    on_the_runs_gpu = backend == "cuda" and (product, architecture) == (B200, SM100)
    assert counted == (admitted and on_the_runs_gpu)
    if backend == "cpu-test":
        assert not counted  # a test backend never raises a level, whatever the key


CODES = {"own": rerun_artifacts(OWN.manifests), "other": rerun_artifacts(OTHER.manifests)}
CONTENT = {a.digest: a.content for p in (OWN, OTHER) for a in (p.solution, p.workload)}


@settings(max_examples=100, deadline=None)
@given(
    solution=st.sampled_from(["own", "other", "made-up"]),
    workload=st.sampled_from(["own", "other", "made-up"]),
    held=st.sets(st.sampled_from(["solution", "workload"])),
)
def test_admission_and_the_verifier_agree_on_what_a_job_measures(
    solution: str, workload: str, held: set[str]
) -> None:
    """Admission's rule (the ledger's store holding what it holds) and the verifier's (the
    fold, then the bundle carrying the same): a job admission admits is one whose result
    the verifier counts and finds carried; one it refuses, the verifier never counts, or
    finds its code missing from the bundle."""

    def digest(choice: str, role: str) -> str:
        if choice == "made-up":
            return "sha256:" + ("1" if role == "solution" else "2") * 64
        found = getattr(CODES[choice], role)
        assert found is not None
        return str(found)

    asked = (digest(solution, "solution"), digest(workload, "workload"))
    stored = {asked[0] if "solution" in held else "", asked[1] if "workload" in held else ""}

    def content(digest: str) -> bytes | None:
        return CONTENT.get(digest) if digest in stored else None

    try:
        check_job_code(OWN.manifests, *asked, stored.__contains__, content)
        admitted = True
    except UnboundJobError:
        admitted = False
    fold = _fold(*asked)
    carried = True
    for code in fold.measured.values():
        try:
            check_job_code(OWN.manifests, *code, stored.__contains__, content, held_by="the bundle")
        except UnboundJobError:
            carried = False
    verified = fold.evidence.level is EvidenceLevel.VERIFIED and carried
    assert verified == admitted


# -------------------------------------------- the workload's bytes rebuild the run's, exactly


def _submitted_rmsnorm() -> tuple[PreparedSubmission, dict[str, Any], list[dict[str, Any]]]:
    definition = json.loads((RMSNORM / "definition.json").read_bytes())
    text = (RMSNORM / "workload.jsonl").read_text()
    return OWN, definition, [json.loads(line) for line in text.splitlines() if line]


def _held(*found: Artifact) -> tuple[Any, Any]:
    by_digest = {a.digest: a.content for a in found}
    return by_digest.__contains__, by_digest.get


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_only_the_suites_own_workloads_rebuild_a_submitted_run(data: st.DataObject) -> None:
    """A submission's workload is the suite of all 14 cases: an artifact of any other
    selection of them (one case, some, all but one, a repeat) is refused, with the run's
    digests unchanged; the artifact of exactly its workloads binds."""
    prepared, definition, lines = _submitted_rmsnorm()
    picked = data.draw(st.lists(st.sampled_from(range(len(lines))), min_size=1, max_size=16))
    package = workload_artifact(definition, [lines[i] for i in picked])
    manifests = copy.deepcopy(prepared.manifests)
    manifests["workload"] = referencing(manifests["workload"], package)
    assert check_manifest_set(manifests).run_digest == prepared.run_digest
    held, content = _held(prepared.solution, package)
    try:
        check_job_code(manifests, prepared.solution.digest, package.digest, held, content)
        bound = True
    except UnboundJobError as exc:
        assert "does not describe the run's workload" in exc.message
        bound = False
    assert bound == (picked == list(range(len(lines))))


def test_an_honest_sol_execbench_import_binds_and_a_case_among_others_does_not() -> None:
    """A SOL-ExecBench folder import's run is one case: the artifact it stores (that case
    alone) binds; one holding that case with another beside it is not the run's workload."""
    [record] = [r for r in map_sol_execbench(traced_files("cuda_cpp-rmsnorm"))]
    assert isinstance(record, ImportRecord)
    named = rerun_artifacts(record.manifests)
    assert named.solution is not None and named.workload is not None
    stored = {a.digest: a for a in record.artifacts}
    held, content = _held(*record.artifacts)
    check_job_code(record.manifests, named.solution, named.workload, held, content)
    package = json.loads(stored[named.workload].content)
    two = workload_artifact(package["definition"], [*package["workloads"], *package["workloads"]])
    widened = copy.deepcopy(record.manifests)
    widened["workload"] = referencing(widened["workload"], two)
    held, content = _held(*record.artifacts, two)
    with pytest.raises(UnboundJobError, match="does not describe the run's workload"):
        check_job_code(widened, named.solution, two.digest, held, content)
