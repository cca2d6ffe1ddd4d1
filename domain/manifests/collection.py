"""The manifests held by one document: a single manifest, a list, or a named set.

The named-set form is the seed's ``{run, protocol, environment, implementation?, workload?}``.
"""

from __future__ import annotations

from typing import Any

from domain.errors import ManifestError
from domain.manifests.manifest_set import ALL_MEMBERS


def is_manifest_set(document: object) -> bool:
    return (
        isinstance(document, dict)
        and "kind" not in document
        and "run" in document
        and set(document) <= set(ALL_MEMBERS)
    )


def manifests_in(document: object) -> list[tuple[str | None, dict[str, Any]]]:
    """(role or None, manifest) pairs in document order."""
    if isinstance(document, list):
        items: list[tuple[str | None, Any]] = [(None, item) for item in document]
    elif is_manifest_set(document):
        assert isinstance(document, dict)
        items = [(role, document[role]) for role in ALL_MEMBERS if document.get(role) is not None]
    elif isinstance(document, dict) and "kind" in document:
        items = [(None, document)]
    else:
        raise ManifestError(
            "expected a manifest (with kind), a list of manifests, or a {run, protocol, "
            "environment, ...} set"
        )
    for index, (_, item) in enumerate(items):
        if not isinstance(item, dict):
            raise ManifestError(f"item {index} is not a manifest object")
    return items


_KIND_ROLES = {
    "BenchmarkRun": "run",
    "BenchmarkProtocol": "protocol",
    "ExecutionEnvironment": "environment",
    "ImplementationRevision": "implementation",
    "WorkloadCase": "workload",
    "WorkloadSuite": "workload",
}


def as_manifest_set(document: object) -> dict[str, dict[str, Any]]:
    """Arrange a document's manifests by role for ingestion (a list is sorted by kind)."""
    result: dict[str, dict[str, Any]] = {}
    for role, manifest in manifests_in(document):
        resolved = role or _KIND_ROLES.get(str(manifest.get("kind")))
        if resolved is None:
            raise ManifestError(f"a {manifest.get('kind')} has no place in a run's manifest set")
        if resolved in result:
            raise ManifestError(f"the document holds more than one {resolved} manifest")
        result[resolved] = manifest
    return result
