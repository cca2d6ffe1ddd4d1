"""A FlashInfer-Bench solution → ``ImplementationRevision``, in the catalog's shape.

The entry-point file is the ``source`` (content digest, size), ``callable`` comes from
``spec.entry_point``, the supported dtypes are the definition's input dtypes, the products
``spec.target_hardware``, the architectures ``["unknown"]``, the licence the dataset's and
``projectRevision`` the dataset repository with, when known, its commit. Every source file is
kept as an artifact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.importers.catalog_form import file_artifact, manifest, sorted_unique
from domain.importers.fields import MappingError, as_object, field, identifier, text
from domain.importers.flashinfer_trace.dataset import DATASET_LICENSE, DATASET_REPOSITORY
from domain.importers.names import MAX_DESCRIPTION, MAX_TITLE, clip, object_name
from domain.importers.operations import input_dtypes
from domain.importers.records import Artifact


def _source_files(
    solution: Mapping[str, Any], entry_path: str, where: str
) -> tuple[list[Artifact], Artifact]:
    """Every source file as an artifact, and the entry point's among them."""
    raw_sources = field(solution, "sources", where)
    if not isinstance(raw_sources, list) or not raw_sources:
        raise MappingError(f"{where}.sources must be a non-empty list")
    artifacts: list[Artifact] = []
    entry_artifact: Artifact | None = None
    for index, raw in enumerate(raw_sources):
        source = as_object(raw, f"{where}.sources[{index}]")
        source_path = text(source.get("path"), f"{where}.sources[{index}].path")
        content = text(source.get("content"), f"{where}.sources[{index}].content", allow_empty=True)
        artifact = file_artifact(content.encode("utf-8"), source_path)
        artifacts.append(artifact)
        if source_path == entry_path:
            entry_artifact = artifact
    if entry_artifact is None:
        raise MappingError(f"{where}: entry point file {entry_path!r} is not among its sources")
    return artifacts, entry_artifact


def _metadata(
    solution: Mapping[str, Any], name: str, operation: Mapping[str, Any], revision: str | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": object_name(name), "title": clip(name, MAX_TITLE)}
    author = solution.get("author")
    if isinstance(author, str) and author:
        metadata["authors"] = [{"name": clip(author, MAX_TITLE)}]
    description = solution.get("description")
    if isinstance(description, str) and description:
        metadata["description"] = clip(description, MAX_DESCRIPTION)
    if revision is not None and isinstance(author, str):
        # The dataset's own layout, so the reference opens the solution at that commit.
        definition = solution.get("definition")
        family = operation["spec"]["family"].replace("-", "_")
        metadata["sourceRefs"] = [
            {
                "url": f"{DATASET_REPOSITORY}/blob/{revision}/solutions/{author}/{family}/"
                f"{definition}/{name}.json"
            }
        ]
    return metadata


def implementation_revision(
    solution: Mapping[str, Any],
    operation: Mapping[str, Any],
    operation_digest: str,
    revision: str | None,
) -> tuple[dict[str, Any], tuple[Artifact, ...]]:
    """The solution's ``ImplementationRevision`` and its source files as artifacts."""
    name = text(solution.get("name"), "solution.name")
    where = f"solution {name}"
    spec = as_object(field(solution, "spec", where), f"{where}.spec")
    language = identifier(text(spec.get("language"), f"{where}.spec.language"), where)
    entry = text(spec.get("entry_point"), f"{where}.spec.entry_point")
    path, _, symbol = entry.partition("::")
    artifacts, entry_artifact = _source_files(solution, path, where)
    hardware = spec.get("target_hardware") or []
    if not isinstance(hardware, list):
        raise MappingError(f"{where}.spec.target_hardware must be a list")
    callable_: dict[str, Any] = {"language": language, "path": path}
    if symbol:
        callable_["symbol"] = symbol
    source_spec: dict[str, Any] = {
        "contentDigest": entry_artifact.digest,
        "fileName": path.rsplit("/", 1)[-1],
    }
    if entry_artifact.content:
        source_spec["sizeBytes"] = len(entry_artifact.content)
    project_revision: dict[str, Any] = {"repository": DATASET_REPOSITORY}
    if revision is not None:
        project_revision["commit"] = revision
    impl_spec: dict[str, Any] = {
        "source": source_spec,
        "support": {
            "dtypes": input_dtypes(operation),
            "productsTested": sorted_unique(
                text(h, f"{where}.spec.target_hardware") for h in hardware
            ),
            "hardwareArchitectures": ["unknown"],
        },
        "callable": callable_,
        "licensing": {"declared": DATASET_LICENSE, "concluded": DATASET_LICENSE},
        "operation": {"specDigest": operation_digest},
        "projectRevision": project_revision,
    }
    metadata = _metadata(solution, name, operation, revision)
    return manifest("ImplementationRevision", metadata, impl_spec), tuple(artifacts)
