"""What a rerun job measures, and on what an agent key may measure it (issue 32).

Two bindings, each written once here and called by admission, by the evidence policy's fold
(``domain.run_facts.RunFold``) and by the offline verifier:

* **A job is bound to its run's code,** by the run's digests alone (never by
  ``metadata.sourceRefs``, which no digest covers and an ingester or attachment may write):
  its solution (``artifactDigest``) is exactly the implementation's digested
  ``spec.source.contentDigest``, and a run whose implementation pins none, or references an
  artifact other than the one it pins, cannot be rerun (:func:`job_code_problem`, which needs
  no bytes: the fold applies it). Its workload (``workloadDigest``) is the artifact the
  workload manifest references, and that artifact's content must rebuild the run's workload
  manifest digest exactly (:func:`workload_content_problem`: the suite of all its workloads
  for a suite, the one workload alone for a case). Admission (the ledger's store) and the
  offline verifier (the bundle's artifacts) check the content too, and that both are held
  (``ledger.authority.job_code.check_job_code``).
* **An agent key is bound to device classes.** Its registration names them: a GPU class
  (backend ``cuda``, a product and an architecture, e.g. ``NVIDIA B200/sm_100``) or a test
  backend class (``cpu-test``). A claim or result must come from a device of one of the key's
  classes, and only a measuring backend (``MEASURING_BACKENDS``) moves evidence, so a key
  bound to a test backend can never raise a run's level. A key holds GPU classes or test
  classes, never both: a key that runs untrusted code on a test backend must not be able to
  sign GPU results.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from domain.documents import parse_json
from domain.errors import DomainError, ManifestError
from domain.statements import MEASURING_BACKENDS, TEST_BACKENDS, Role

if TYPE_CHECKING:
    from domain.statements import KeyPredicate


class DeviceClass(NamedTuple):
    """One class of device a key may measure on; product and architecture only for a GPU."""

    backend: str
    product: str | None = None
    architecture: str | None = None

    @property
    def measuring(self) -> bool:
        return self.backend in MEASURING_BACKENDS

    def label(self) -> str:
        """As ``kernelindex keys register --device`` spells it."""
        if self.product is None:
            return self.backend
        return f"{self.product}/{self.architecture}"

    def admits(self, product: str, architecture: str, backend: str) -> bool:
        """Whether a device (as a claim or a result states it) is of this class. A test
        class is its backend whatever hardware the device reports: it measures nothing."""
        if backend != self.backend:
            return False
        return not self.measuring or (product, architecture) == (self.product, self.architecture)

    def to_json(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (
                ("backend", self.backend),
                ("product", self.product),
                ("architecture", self.architecture),
            )
            if v is not None
        }


def device_classes(value: object) -> frozenset[DeviceClass]:
    """The classes a key registration's ``devices`` names (empty: none, or not a list)."""
    if not isinstance(value, list):
        return frozenset()
    return frozenset(
        DeviceClass(
            str(d.get("backend")),
            None if d.get("product") is None else str(d.get("product")),
            None if d.get("architecture") is None else str(d.get("architecture")),
        )
        for d in value
        if isinstance(d, Mapping)
    )


class DeviceClassError(DomainError):
    code = "bad-device-class"


def parse_device_class(text: str) -> DeviceClass:
    """``PRODUCT/ARCH`` (a CUDA GPU, e.g. ``NVIDIA B200/sm_100``) or a test backend's name."""
    value = text.strip()
    if value in TEST_BACKENDS:
        return DeviceClass(value)
    product, slash, architecture = value.rpartition("/")
    if not slash or not product.strip() or not architecture.strip():
        raise DeviceClassError(
            f"{text!r} is not a device class: give PRODUCT/ARCH for a GPU (e.g. "
            f"'NVIDIA B200/sm_100') or a test backend ({', '.join(sorted(TEST_BACKENDS))})"
        )
    return DeviceClass("cuda", product.strip(), architecture.strip())


def may_measure(
    classes: Iterable[DeviceClass], product: str, architecture: str, backend: str
) -> bool:
    """Whether a key bound to ``classes`` may claim or report this device."""
    return any(c.admits(product, architecture, backend) for c in classes)


def counts_for_evidence(
    classes: Iterable[DeviceClass], product: str, architecture: str, backend: str
) -> bool:
    """Whether a result on this device, signed by a key bound to ``classes``, may move
    evidence: a measuring backend, and a measuring class of the key's that admits it (the
    key's registration decides, never what the result declares)."""
    return backend in MEASURING_BACKENDS and any(
        c.measuring and c.admits(product, architecture, backend) for c in classes
    )


def describe_classes(classes: Iterable[DeviceClass]) -> str:
    return ", ".join(sorted(c.label() for c in classes)) or "none"


def check_agent_registration(predicate: KeyPredicate) -> None:
    """An agent key is registered with the device classes it may measure on (a key bound to
    nothing could claim nothing; one that names none must not be taken for one bound to all)."""
    if Role.AGENT in (predicate.roles or ()) and not predicate.devices:
        raise ManifestError(
            "an agent key's registration names the device classes it may measure on "
            '(predicate.devices, e.g. [{"backend": "cuda", "product": "NVIDIA B200", '
            '"architecture": "sm_100"}] or [{"backend": "cpu-test"}]): use one key per backend'
        )


def job_code_problem(
    manifests: Mapping[str, Any], artifact_digest: str, workload_digest: str
) -> str | None:
    """Why a job naming these artifacts does not measure the run's own code (None: it does),
    as far as digests tell: the workload's content is :func:`workload_content_problem`'s."""
    # Loaded for a run's rerun jobs only: a bundle or page with none (`kernelindex verify`
    # of an ingested run) never loads the importers' records.
    from domain.importers.records import rerun_artifacts  # noqa: PLC0415

    named = rerun_artifacts(manifests)
    if named.unpinned_solution is not None:
        return (
            f"the run's implementation references the solution artifact "
            f"{named.unpinned_solution}, which is not the source it pins "
            "(spec.source.contentDigest): a reference enters no digest, so no job can be bound "
            "to the run's own code"
        )
    if named.solution is None:
        return (
            "the run's manifests name no solution artifact (its implementation pins no source "
            "by spec.source.contentDigest), so no job can measure the run's own code"
        )
    if named.workload is None:
        return (
            "the run's manifests name no workload artifact, so no job can measure the run's "
            "own workload"
        )
    if artifact_digest != named.solution:
        return (
            f"the job's solution artifact {artifact_digest} is not the run's own: its "
            f"manifests name {named.solution} (the implementation's pinned source)"
        )
    if workload_digest != named.workload:
        return (
            f"the job's workload artifact {workload_digest} is not the run's own: its "
            f"manifests name {named.workload}"
        )
    return None


def _rebuilt_workloads(definition: Mapping[str, Any], workloads: list[Any]) -> set[str]:
    """The workload manifest digests an artifact's definition and workloads rebuild, under
    each mapping a rerunnable source uses: the suite of all of them (SOL-ExecBench, direct
    submissions) and, for a single workload, that case (SOL-ExecBench's and
    FlashInfer-Bench's). A definition a mapping cannot read rebuilds nothing under it."""
    # The importers' mappings load only when a workload artifact is checked (admission, the
    # verifier), never for the fold's digest checks that every read command runs.
    from domain.importers.fields import RECORD_ERRORS  # noqa: PLC0415
    from domain.importers.flashinfer_trace import workload_case_digests  # noqa: PLC0415
    from domain.importers.sol_execbench import map_definition  # noqa: PLC0415

    rebuilt: set[str] = set()
    try:
        mapped = map_definition(definition, workloads)
        rebuilt.add(mapped.suite_digest or "")
        if len(workloads) == 1:
            rebuilt.update(mapped.case_digests.values())
    except DomainError:
        pass
    if len(workloads) == 1:
        with contextlib.suppress(*RECORD_ERRORS):
            rebuilt.update(workload_case_digests(definition, workloads))
    return rebuilt - {""}


def workload_content_problem(content: bytes, workload_manifest_digest: str) -> str | None:
    """Why a workload artifact is not exactly the run's workload (None: it is).

    The run names its workload by manifest digest (``run.spec.workloadDigest``); the artifact
    is what the agent runs. Mapped as the importer maps it, the artifact must rebuild that
    digest: as a suite, from all of its workloads, nothing more or less; as a case, from its
    one workload alone. One case of a suite, or a suite holding the run's case among others,
    is not what the run measured.
    """
    try:
        document = parse_json(content)
    except DomainError as exc:
        return f"the workload artifact is not JSON: {exc.message}"
    if not isinstance(document, dict) or not isinstance(document.get("definition"), dict):
        return "the workload artifact is not {definition, workloads}"
    workloads = document.get("workloads")
    if not isinstance(workloads, list) or not workloads:
        return "the workload artifact holds no workloads"
    if workload_manifest_digest not in _rebuilt_workloads(document["definition"], workloads):
        return (
            f"the workload artifact does not describe the run's workload "
            f"{workload_manifest_digest}: mapped as its source maps it, it rebuilds another"
        )
    return None
