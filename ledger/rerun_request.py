"""Rerun requests: what a request for a run asks an agent to fetch, and the checks before it.

A request names the solution and workload artifacts by digest (the agent fetches and re-hashes
them) and the hardware. The artifacts are always the ones the run's own digests bind
(:func:`domain.importers.records.rerun_artifacts`: direct submissions and SOL-ExecBench folder
imports pin their solution; a FlashInfer-Bench implementation pins only its entry file, so
such a run cannot be rerun): a job is bound to its run's code
(:mod:`domain.rerun_binding`), and :func:`check_job_code` is that rule with the artifacts held,
as admission, the CLI and the offline verifier apply it. A run whose manifests name no
solution cannot be rerun: there is no override, since a job measuring code the run does not
name could not verify the run. Only the hardware may be chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from domain.documents import parse_json
from domain.errors import DomainError
from domain.importers.records import rerun_artifacts
from domain.importers.sol_execbench.vocabulary import architecture_of_product
from domain.manifests.manifest_set import check_manifest_set
from domain.rerun_binding import job_code_problem, workload_content_problem
from ledger.authority.job_code import UnboundJobError, check_job_code
from ledger.errors import NotFoundError
from ledger.store.artifacts import ArtifactNotFound, ArtifactStore


class RerunRequestError(DomainError):
    """A rerun request cannot be made as asked: something it must name is unknown or wrong."""

    code = "bad-rerun-request"


@dataclass(frozen=True)
class RerunTarget:
    """What a rerun request for a run asks for: artifacts by digest and the hardware."""

    run_digest: str
    run_name: str
    solution_digest: str
    workload_digest: str
    product: str
    architecture: str
    workload_manifest_digest: str  # the run's spec.workloadDigest, to check the artifact against


def _source_of(manifests: Mapping[str, Any]) -> str:
    native = (manifests["run"].get("spec") or {}).get("sourceNative") or {}
    return str(native.get("source") or "unknown")


def _missing(manifests: Mapping[str, Any], solution: bool, workload: bool) -> RerunRequestError:
    """Why a request cannot be made from the run alone: what its source did not publish."""
    lacking = [
        *(["solution (its implementation pins no source)"] if not solution else []),
        *(["definition and workloads"] if not workload else []),
    ]
    return RerunRequestError(
        f"the run's source ({_source_of(manifests)}) published no "
        f"{' and no '.join(lacking)} for it, so there is nothing an agent could run: a rerun "
        "measures only the code and workload the run's own manifests name"
    )


def _architecture(hardware: Mapping[str, Any], product: object) -> str | None:
    """The environment's architecture when the product is its own, else the one the product
    has (FlashInfer-Bench's environments, as the catalog writes them, state ``unknown``)."""
    stated = hardware.get("architecture")
    if product == hardware.get("product") and isinstance(stated, str) and stated != "unknown":
        return stated
    return architecture_of_product(product) if isinstance(product, str) else None


def rerun_target(
    run_digest: str,
    manifests: Mapping[str, Any],
    *,
    product: str | None = None,
    architecture: str | None = None,
) -> RerunTarget:
    """The request's fields: the artifacts the run's own manifests name, and the hardware
    given, else the run's environment's.

    ``manifests`` is the set the run was ingested with; it must digest to ``run_digest`` (a
    server's reply is checked this way before anything in it is signed).
    """
    if not manifests:
        raise NotFoundError(f"run {run_digest} has no ingested manifests")
    checked = check_manifest_set(manifests)
    if checked.run_digest != run_digest:
        raise RerunRequestError(
            f"the manifests given for run {run_digest} digest to {checked.run_digest}"
        )
    hardware = ((manifests["environment"].get("spec") or {}).get("hardware")) or {}
    named = rerun_artifacts(manifests)
    chosen_product = product or hardware.get("product")
    chosen_architecture = architecture or _architecture(hardware, chosen_product)
    chosen_solution = named.solution
    chosen_workload = named.workload
    if not chosen_product or not chosen_architecture or chosen_architecture == "unknown":
        raise RerunRequestError(
            "the run's environment does not state its GPU product and architecture; "
            "give --gpu and --arch"
        )
    if named.unpinned_solution is not None:
        raise RerunRequestError(str(job_code_problem(manifests, "", "")))
    if not chosen_solution or not chosen_workload:
        raise _missing(manifests, bool(chosen_solution), bool(chosen_workload))
    return RerunTarget(
        run_digest=run_digest,
        run_name=checked.run_name,
        solution_digest=str(chosen_solution),
        workload_digest=str(chosen_workload),
        product=str(chosen_product),
        architecture=str(chosen_architecture),
        workload_manifest_digest=str(checked.run["spec"]["workloadDigest"]),
    )


def check_workload_artifact(content: bytes, workload_manifest_digest: str) -> None:
    """Refuse a workload artifact that does not rebuild the run's workload manifest exactly
    (``domain.rerun_binding.workload_content_problem``, the rule admission and the verifier
    hold a job to): checked here before anything is signed."""
    problem = workload_content_problem(content, workload_manifest_digest)
    if problem is not None:
        raise RerunRequestError(problem)


ArtifactFetch = Callable[[str], bytes | None]
__all__ = [
    "ArtifactFetch",
    "RerunRequestError",
    "RerunTarget",
    "UnboundJobError",
    "check_job_code",
    "check_rerun_artifacts",
    "check_workload_artifact",
    "rerun_target",
    "stored_artifacts",
]


def stored_artifacts(store: ArtifactStore) -> ArtifactFetch:
    """Fetch from this ledger's own artifact store (None: not stored)."""
    return lambda digest: store.get(digest).content if store.has(digest) else None


def check_rerun_artifacts(fetch: ArtifactFetch, target: RerunTarget) -> None:
    """Both artifacts can be fetched where the agent will fetch them (a home's store, or a
    server), the solution is a solution document and the workload is the run's: the same
    checks before either way of signing a request (admission holds it to
    :func:`check_job_code`; these check the bytes too, before anything is signed)."""
    contents: dict[str, bytes] = {}
    for role, digest in (
        ("solution", target.solution_digest),
        ("workload", target.workload_digest),
    ):
        content = fetch(digest)
        if content is None:
            raise ArtifactNotFound(
                f"the {role} artifact {digest} the run names is not stored there: an agent "
                "could not fetch it (store it first, e.g. import the run's source again)"
            )
        contents[role] = content
    _check_solution_document(contents["solution"], target.solution_digest)
    check_workload_artifact(contents["workload"], target.workload_manifest_digest)


def _check_solution_document(content: bytes, digest: str) -> None:
    """The agent runs a solution document (JSON naming its sources), not a bare source file."""
    try:
        document = parse_json(content)
    except DomainError:
        document = None
    if not isinstance(document, dict) or not isinstance(document.get("sources"), list):
        raise RerunRequestError(
            f"the solution artifact {digest} is not a solution document (a JSON object with "
            "its sources), so an agent could not run it"
        )
