"""What an importer produces: one record per source result, or a rejection with a reason.

Mappers are pure functions from the source's raw bytes to these records; the ledger side
signs and appends them (``ledger.importing``). A record carries the exact bytes it was mapped
from, which are stored as a content-addressed artifact and named by digest in the ingestion
statement, so anyone can re-run the mapping and check it. Where the source publishes a
runnable solution, the record also carries and names what a rerun agent fetches (the rules
at the end of this module, shared with direct submissions).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from domain.canonical import canonical_json
from domain.importers.names import MAX_NAME, slug


@dataclass(frozen=True)
class Artifact:
    """Content the ledger keeps by digest (a solution's source, a raw source response)."""

    content: bytes
    media_type: str
    name: str = ""

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.content).hexdigest()


@dataclass(frozen=True)
class ImportRecord:
    """One run to ingest: its manifest set and where it came from."""

    source: str  # slug, e.g. "sol-execbench"; equals run.spec.sourceNative.source when present
    external_id: str  # the source's id of this result (stable across re-imports)
    manifests: dict[str, dict[str, Any]]  # run, protocol, environment, implementation?, workload?
    snapshot: Artifact  # the raw source document the record was mapped from
    artifacts: tuple[Artifact, ...] = field(default=())  # e.g. solution sources
    fetched_at: str | None = None  # RFC 3339, when the snapshot was fetched, if known
    published_at: str | None = None  # RFC 3339, when the source published the result, if stated
    source_name: str | None = None  # the source's own name ("GPU MODE KernelBot"), if stated


@dataclass(frozen=True)
class Rejection:
    """A source record that cannot be imported, and why. Nothing of it is written."""

    external_id: str | None
    reason: str


@dataclass(frozen=True)
class Skipped(Rejection):
    """Source input that yields no run by design, and why: a leaderboard listing, a folder
    with no traces, a submission repeated verbatim. Not an error; nothing of it is written.

    A subclass of :class:`Rejection` so that a consumer that does not know it still reports
    the reason; :class:`ledger.importing.Importer` counts it apart from the rejections.
    """


# --- what a rerun agent fetches by digest -----------------------------------------------------
#
# One rule for every source that publishes a runnable solution (direct submissions,
# SOL-ExecBench folders, FlashInfer-Bench traces): the workload the agent runs is the JSON of
# ``{"definition": ..., "workloads": [...]}`` (:func:`workload_artifact`), and the run names
# it as a ``kernelindex:artifact/<digest>`` entry of the workload manifest's
# ``metadata.sourceRefs`` (:func:`referencing`; read back by :func:`rerun_artifacts`).
# Metadata never enters a digest, so a reference is only a name: a job's solution is the
# implementation's digested ``spec.source`` and its workload must rebuild the run's workload
# digest (``domain.rerun_binding``). FlashInfer-Bench also references its solution document,
# which its implementation does not pin (only the entry file): such a run cannot be rerun.

ARTIFACT_URI_PREFIX: Final = "kernelindex:artifact/"
WORKLOAD_MEDIA_TYPE: Final = "application/vnd.kernelindex.rerun-workload+json"
# A manifest kept as an artifact (canonical JSON), named by its ``metadata.name``: an
# operation's spec, an implementation kept to be rerun, the catalog's other manifests.
MANIFEST_MEDIA_TYPE: Final = "application/vnd.kernelindex.manifest+json"
# A source's whole definition as it published it (its reference implementation's code with
# it, which the OperationSpec does not keep), stored beside the solutions mapped onto it.
DEFINITION_MEDIA_TYPE: Final = "application/vnd.kernelindex.definition+json"
WORKLOAD_SUFFIX: Final = ".workload.json"
DEFINITION_SUFFIX: Final = ".definition.json"


def _artifact_name(definition: Mapping[str, Any], suffix: str) -> str:
    base = slug(str(definition.get("name") or ""))[:MAX_NAME] or "workload"
    return base + suffix


def manifest_artifact(manifest: Mapping[str, Any], name: str | None = None) -> Artifact:
    """A manifest as the artifact that keeps it (named ``name``, else its metadata's)."""
    named = name if name is not None else str((manifest.get("metadata") or {}).get("name"))
    return Artifact(canonical_json(manifest), MANIFEST_MEDIA_TYPE, named)


def _document_json(document: Mapping[str, Any]) -> bytes:
    # Compact, in the document's own key order (see ``workload_artifact``).
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8")


def definition_artifact(definition: Mapping[str, Any]) -> Artifact:
    """A definition as the source published it, named by its slug: what the operation page
    reads its reference implementation from (``api.service.operation_specs``)."""
    name = _artifact_name(definition, DEFINITION_SUFFIX)
    return Artifact(_document_json(definition), DEFINITION_MEDIA_TYPE, name)


def workload_artifact(
    definition: Mapping[str, Any], workloads: Sequence[Mapping[str, Any]]
) -> Artifact:
    """The rerun agent's workload artifact: a definition with the workloads to run.

    Compact JSON in the documents' own key order, not RFC 8785's sorted one: a definition's
    ``inputs`` and ``outputs`` are objects whose order is the solution's argument order
    (SOL-ExecBench and the agent pass them in document order), which sorting would lose. The
    same documents give the same bytes, so the digest is still a stable name.
    """
    document = {"definition": definition, "workloads": list(workloads)}
    name = _artifact_name(definition, WORKLOAD_SUFFIX)
    return Artifact(_document_json(document), WORKLOAD_MEDIA_TYPE, name)


def is_artifact_reference(ref: object) -> bool:
    """Whether a ``sourceRefs`` entry names a stored artifact (rather than a web page)."""
    url = ref.get("url") if isinstance(ref, Mapping) else None
    return isinstance(url, str) and url.startswith(ARTIFACT_URI_PREFIX)


def referencing(manifest: Mapping[str, Any], artifact: Artifact) -> dict[str, Any]:
    """A copy of ``manifest`` whose ``metadata.sourceRefs`` names ``artifact`` (after the
    references it has; any other artifact reference it carried is replaced)."""
    copied = copy.deepcopy(dict(manifest))
    metadata = copied.setdefault("metadata", {})
    kept = [r for r in metadata.get("sourceRefs") or [] if not is_artifact_reference(r)]
    metadata["sourceRefs"] = [*kept, {"url": ARTIFACT_URI_PREFIX + artifact.digest}]
    return copied


def without_artifact_references(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest less the artifact references :func:`referencing` adds (the same manifest
    as a source that names no rerun artifacts writes it)."""
    metadata = manifest.get("metadata") or {}
    refs = metadata.get("sourceRefs")
    if not isinstance(refs, list) or not any(is_artifact_reference(r) for r in refs):
        return dict(manifest)
    kept = [r for r in refs if not is_artifact_reference(r)]
    others = {k: v for k, v in metadata.items() if k != "sourceRefs"}
    return {**manifest, "metadata": others | ({"sourceRefs": kept} if kept else {})}


def referenced_artifact(manifest: object) -> str | None:
    """The artifact digest a manifest names in its ``metadata.sourceRefs``, if any."""
    metadata = manifest.get("metadata") if isinstance(manifest, Mapping) else None
    refs = metadata.get("sourceRefs") if isinstance(metadata, Mapping) else None
    for ref in refs if isinstance(refs, list) else []:
        if is_artifact_reference(ref):
            return str(ref["url"])[len(ARTIFACT_URI_PREFIX) :]
    return None


@dataclass(frozen=True)
class RerunArtifacts:
    """The digests of what an agent would fetch to rerun a run, as its manifests name them."""

    solution: str | None
    workload: str | None
    # An artifact the implementation's ``sourceRefs`` name that its pinned source is not
    # (a FlashInfer-Bench solution document, whose implementation pins only the entry file;
    # or a reference added to redirect a job): no digest of the run binds it.
    unpinned_solution: str | None = None


def rerun_artifacts(manifests: Mapping[str, Any]) -> RerunArtifacts:
    """The solution and workload artifacts a run's manifest set names (None: not named).

    The solution is the implementation's ``spec.source.contentDigest`` (a SOL solution
    document pinned whole, a submission's solution.json as submitted): a digested field, so
    the run's digests name it. ``metadata.sourceRefs`` enters no digest: an artifact reference
    there that is not the pinned source leaves the run with no solution (``unpinned_solution``
    says which), never one an ingester chose. The workload is the workload manifest's artifact
    reference, a name only: its content is bound by rebuilding the run's workload digest
    (``domain.rerun_binding.workload_content_problem``).
    """
    implementation = manifests.get("implementation") or {}
    source = implementation.get("spec", {}).get("source") or {}
    content = source.get("contentDigest") if isinstance(source, Mapping) else None
    pinned = str(content) if isinstance(content, str) else None
    metadata = implementation.get("metadata")
    refs = metadata.get("sourceRefs") if isinstance(metadata, Mapping) else None
    referenced = [
        str(ref["url"])[len(ARTIFACT_URI_PREFIX) :]
        for ref in (refs if isinstance(refs, list) else [])
        if is_artifact_reference(ref)
    ]
    unpinned = next((digest for digest in referenced if digest != pinned), None)
    return RerunArtifacts(
        pinned if unpinned is None else None,
        referenced_artifact(manifests.get("workload")),
        unpinned,
    )
