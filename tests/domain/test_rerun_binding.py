"""Issue 32's two bindings as pure rules (domain.rerun_binding): a job measures its run's own
code, and an agent key measures only on the device classes its registration names. What
admission refuses, the evidence fold (and so the offline verifier) never counts."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import DomainError
from domain.event_names import EventName
from domain.evidence import EvidenceLevel
from domain.importers.records import rerun_artifacts
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
from tests.projections.projection_world import (
    B200,
    MANIFESTS,
    RUN_21613,
    SEED,
    SM100,
    Job,
    rerun_result,
)

H100, SM90 = "NVIDIA H100", "sm_90"
JOB = Job(SEED, "12345678-1234-4234-8234-123456789abc", "ab" * 32, B200, SM100)


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


def test_a_job_is_bound_only_to_the_code_its_run_names() -> None:
    own, other = rerun_artifacts(MANIFESTS[SEED]), rerun_artifacts(MANIFESTS[RUN_21613])
    assert own.solution and own.workload and other.solution and other.workload
    assert job_code_problem(MANIFESTS[SEED], own.solution, own.workload) is None
    assert "is not the run's own" in str(
        job_code_problem(MANIFESTS[SEED], other.solution, own.workload)
    )
    assert "is not the run's own" in str(
        job_code_problem(MANIFESTS[SEED], own.solution, other.workload)
    )
    unnamed = copy.deepcopy(MANIFESTS[SEED])
    del unnamed["implementation"]
    assert "name no solution artifact" in str(job_code_problem(unnamed, own.solution, own.workload))


def _fold(
    solution: str, workload: str, *, devices: frozenset[DeviceClass] | None = None, **env: str
) -> RunFold:
    """The seed folded with one request for this code and a passing result on ``env``."""
    fold = RunFold.ingested(1, SEED, {"source": "sol-execbench", "manifests": MANIFESTS[SEED]})
    if devices is not None:
        fold.devices_of = lambda _: devices
    request = {
        "jobId": JOB.job_id,
        "artifactDigest": solution,
        "workloadDigest": workload,
    }
    fold.apply(EventName.RUN_RERUN_REQUESTED, 2, "admin", request)
    result = rerun_result(JOB)
    result["environment"] |= env
    fold.apply(EventName.RUN_RERUN_RECORDED, 3, "agent", result)
    return fold


def test_the_evidence_policy_counts_a_result_only_for_a_job_bound_to_the_run() -> None:
    own, other = rerun_artifacts(MANIFESTS[SEED]), rerun_artifacts(MANIFESTS[RUN_21613])
    assert own.solution and own.workload and other.solution and other.workload
    start = RunFold.ingested(1, SEED, {"source": "x", "manifests": MANIFESTS[SEED]}).evidence
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
    own = rerun_artifacts(MANIFESTS[SEED])
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


CODES = {
    "own": rerun_artifacts(MANIFESTS[SEED]),
    "other": rerun_artifacts(MANIFESTS[RUN_21613]),
}


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
    try:
        check_job_code(MANIFESTS[SEED], *asked, stored.__contains__)
        admitted = True
    except UnboundJobError:
        admitted = False
    fold = _fold(*asked)
    carried = True
    for code in fold.measured.values():
        try:
            check_job_code(MANIFESTS[SEED], *code, stored.__contains__, held_by="the bundle")
        except UnboundJobError:
            carried = False
    verified = fold.evidence.level is EvidenceLevel.VERIFIED and carried
    assert verified == admitted
