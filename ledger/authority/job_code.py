"""The rule that binds a rerun job to its run's code, with the artifacts held: admission
(against the ledger's artifact store), ``kernelindex rerun request`` and the offline verifier
(against the bundle's artifacts) all call :func:`check_job_code`. Pure, like the rest of
``ledger.authority``: a verifier loads no database code."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from domain.rerun_binding import job_code_problem, workload_content_problem
from ledger.errors import RerunJobError


class UnboundJobError(RerunJobError):
    """A rerun request whose job would not measure the run's own, held code."""

    code = "unbound-job"


ArtifactHeld = Callable[[str], bool]
ArtifactContent = Callable[[str], bytes | None]


def check_job_code(
    manifests: Mapping[str, Any],
    artifact_digest: str,
    workload_digest: str,
    held: ArtifactHeld,
    content: ArtifactContent,
    *,
    held_by: str = "the ledger",
) -> None:
    """A job for a run with these manifests may ask for these artifacts: they are the ones
    the run's digests bind (``domain.rerun_binding.job_code_problem``, which the evidence
    policy applies on every fold too), ``held`` has both (the ledger's store at admission; the
    bundle's artifacts in the offline verifier), and the workload's ``content`` rebuilds the
    run's workload digest (``workload_content_problem``: the bytes, which a fold never sees,
    since the workload's artifact reference enters no digest)."""
    problem = job_code_problem(manifests, artifact_digest, workload_digest)
    if problem is not None:
        raise UnboundJobError(problem)
    for role, digest in (("solution", artifact_digest), ("workload", workload_digest)):
        if not held(digest):
            raise UnboundJobError(
                f"the {role} artifact {digest} is not held by {held_by}: an agent could not "
                "fetch it, nor anyone check what was measured"
            )
    workload = content(workload_digest)
    if workload is None:
        raise UnboundJobError(
            f"the workload artifact {workload_digest} is held by {held_by} but its content is "
            "not at hand (a bundle keeps it only as a rerun workload), so nobody can check it "
            "is the run's workload"
        )
    problem = workload_content_problem(workload, str(manifests["run"]["spec"]["workloadDigest"]))
    if problem is not None:
        raise UnboundJobError(f"the workload artifact {workload_digest}: {problem}")
