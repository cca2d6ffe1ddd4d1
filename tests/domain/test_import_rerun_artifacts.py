"""Imports name what a rerun fetches (issue 17): the workload and solution artifacts.

A SOL-ExecBench trace or a FlashInfer-Bench trace maps to a run whose workload manifest names,
in ``metadata.sourceRefs``, a ``{definition, workloads}`` artifact the record carries, and
whose solution (the whole solution document) is carried and named too — the layout a direct
submission has. Metadata never enters a digest: the run, workload and implementation digests
are pinned below as the importers gave them before the references existed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from domain.importers.flashinfer_trace import map_flashinfer_trace
from domain.importers.records import (
    WORKLOAD_MEDIA_TYPE,
    ImportRecord,
    rerun_artifacts,
    without_artifact_references,
)
from domain.importers.sol_execbench import map_sol_execbench
from domain.manifests.manifest_set import check_manifest_set
from ledger.importing import compare_records
from ledger.rerun_request import RerunRequestError, check_workload_artifact
from tests.sol_traces import (
    FLASHINFER,
    SOL_EXAMPLES,
    definition_of,
    first_workload,
    folder_files,
    traced_files,
)

# (run, workload, implementation) digests of each example's trace (tests/sol_traces.py), as
# the importer gave them before this change (computed from the previous commit's code).
SOL_PINNED = {
    "pytorch-linear_backward": (
        "sha256:f1ac86555f1402ea45f2207988e0cf2763bc3080029e8ec27c061057e8323beb",
        "sha256:88edbaa4f5c56265c683ee4a210bae137c308c5db05832a88498b5a56352b6e5",
        "sha256:53970aff6a4cfd15a92345a71ff49fe48df595230eb4488efc056a598a614f70",
    ),
    "cuda_cpp-rmsnorm": (
        "sha256:94a13eb458a05131fd2db505d1a7480cc9bd1710b8f1b5c2c5085ee8d27eb5d1",
        "sha256:990ddf37577d03e81fb4875e71f53fd9956556f3c25ee73346ff07240306d139",
        "sha256:6efc7e655c91920b112ddcfd76b263816d7d6700ab75d09867e2a59497e986a8",
    ),
}
# The FlashInfer fixture's runs mapped without the dataset commit (as `kernelindex import
# flashinfer-trace` maps them), by workload uuid prefix and solution, before this change.
FLASHINFER_PINNED = {
    ("906efdc6", "flashinfer_wrapper_74a870"): (
        "sha256:2b3247ba915640a6e7e154ac7b5d711cacbff856909eef92e5c5523497910fde"
    ),
    ("1526086b", "flashinfer_wrapper_74a870"): (
        "sha256:33d3f1bf45b2efd257dad976d4e7b2f7b9ee92a241a42151c62f30348437fd1b"
    ),
    ("78c9b621", "flashinfer_wrapper_74a870"): (
        "sha256:f3a1b4ebf9d7a97e9dec4f54f57b00ae6762fc49d9445b011f05d0934da45e2e"
    ),
    ("906efdc6", "claude-opus-4-1_triton_c9eea2"): (
        "sha256:2fe1f2950ae5bd051786b8f06fcc286873701afba6bae06459395b2f0658bf1a"
    ),
    ("1526086b", "claude-opus-4-1_triton_c9eea2"): (
        "sha256:2cb7cd7726241bb1a02e848de0e3d2886bf9fa82864e9465a25528d373bc294b"
    ),
}


def _one_record(files: dict[str, bytes]) -> ImportRecord:
    [record] = list(map_sol_execbench(files))
    assert isinstance(record, ImportRecord), record
    return record


def _artifact(record: ImportRecord, digest: str | None) -> Any:
    by_digest = {a.digest: a for a in record.artifacts}
    assert digest in by_digest, f"{digest} is not among the record's artifacts"
    return by_digest[digest]


@pytest.mark.parametrize("name", sorted(SOL_PINNED))
def test_a_sol_trace_names_its_rerun_artifacts_and_keeps_its_digests(name: str) -> None:
    record = _one_record(traced_files(name))
    digests = check_manifest_set(record.manifests).digests
    assert (digests["run"], digests["workload"], digests["implementation"]) == SOL_PINNED[name]

    named = rerun_artifacts(record.manifests)
    workload = _artifact(record, named.workload)
    assert workload.media_type == WORKLOAD_MEDIA_TYPE
    package = json.loads(workload.content)
    assert package == {"definition": definition_of(name), "workloads": [first_workload(name)]}
    # Key order kept: the definition's inputs are the solution's arguments, in this order.
    assert list(package["definition"]["inputs"]) == list(definition_of(name)["inputs"])
    check_workload_artifact(workload.content, digests["workload"])  # maps back to the run's
    # The solution is the whole solution document the implementation pins.
    solution = _artifact(record, named.solution)
    assert named.solution == record.manifests["implementation"]["spec"]["source"]["contentDigest"]
    files = folder_files(SOL_EXAMPLES / name)
    [document] = [json.loads(v) for k, v in files.items() if k.startswith("solution")]
    assert json.loads(solution.content) == document


def test_flashinfer_traces_name_the_solution_document_and_their_workload() -> None:
    files = folder_files(FLASHINFER)
    records = [r for r in map_flashinfer_trace(files) if isinstance(r, ImportRecord)]
    assert len(records) == len(FLASHINFER_PINNED)
    definition = json.loads(files["definition.json"])
    for record in records:
        trace = json.loads(record.snapshot.content)
        key = (trace["workload"]["uuid"][:8], trace["solution"])
        digests = check_manifest_set(record.manifests).digests
        assert digests["run"] == FLASHINFER_PINNED[key]

        named = rerun_artifacts(record.manifests)
        workload = _artifact(record, named.workload)
        assert json.loads(workload.content) == {
            "definition": definition,
            "workloads": [trace["workload"]],
        }
        check_workload_artifact(workload.content, digests["workload"])
        # The document that runs it is referenced, but the implementation pins only its entry
        # file: no digest binds the document, so the run names no solution to rerun.
        source = record.manifests["implementation"]["spec"]["source"]["contentDigest"]
        assert named.solution is None and named.unpinned_solution not in (None, source)
        solution = json.loads(_artifact(record, named.unpinned_solution).content)
        assert solution["name"] == trace["solution"] and solution["sources"]


def test_a_workload_artifact_of_another_workload_is_refused() -> None:
    linear = _one_record(traced_files("pytorch-linear_backward"))
    rmsnorm = _one_record(traced_files("cuda_cpp-rmsnorm"))
    other = _artifact(linear, rerun_artifacts(linear.manifests).workload)
    with pytest.raises(RerunRequestError, match="does not describe the run's workload"):
        check_workload_artifact(other.content, rmsnorm.manifests["run"]["spec"]["workloadDigest"])


def test_artifact_references_are_not_a_change_of_the_record() -> None:
    """A held copy without them (the catalog's) and a record with them compare equal."""
    record = _one_record(traced_files("cuda_cpp-rmsnorm"))
    plain = {role: without_artifact_references(m) for role, m in record.manifests.items()}
    assert rerun_artifacts(plain).workload is None
    assert compare_records(plain, record.manifests) == ([], [])
    assert compare_records(record.manifests, plain) == ([], [])
