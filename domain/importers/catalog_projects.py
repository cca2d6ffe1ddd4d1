"""The KernelIndex catalog's projects and the implementations each holds (pure).

A catalog implementation row names its project (``projectId``); the implementation's
manifest does not (``ImplementationRevision`` has no project field), so the link is only in
the catalog's rows. :func:`catalog_projects` keeps it as one artifact per catalog import: each
project's name, slug and manifest digest, with the digests of its implementations as their
rows state them. A stated digest is only a name here: a run is counted in a project when the
implementation its own manifests name (checked at admission) is among them, so a wrong one
names no run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from domain.canonical import canonical_json
from domain.errors import DomainError
from domain.importers.kernelindex_catalog import read_line
from domain.importers.records import Artifact
from domain.manifests.canonical_form import manifest_digest

PROJECTS_MEDIA_TYPE: Final = "application/vnd.kernelindex.catalog-projects+json"
PROJECTS_NAME: Final = "kernelindex-catalog:projects"


def catalog_projects(lines: Iterable[bytes]) -> Artifact | None:
    """The export's projects with their implementations' digests, as one artifact (None:
    the export names no project)."""
    projects: dict[str, dict[str, Any]] = {}
    members: dict[str, set[str]] = {}
    for number, line in enumerate(lines, 1):
        try:
            parsed = read_line(line, number)
        except DomainError:
            continue  # the import reports a malformed line; it names no project
        if parsed is None:
            continue
        table, row = parsed
        if table == "projects":
            _add_project(projects, row)
        elif table == "implementations":
            project, digest = row.get("projectId"), row.get("implementationDigest")
            if isinstance(project, str) and isinstance(digest, str):
                members.setdefault(project, set()).add(digest)
    found = [
        {**about, "implementations": sorted(members.get(project_id, ()))}
        for project_id, about in projects.items()
    ]
    if not found:
        return None
    found.sort(key=lambda p: (p["name"], p["slug"]))
    return Artifact(canonical_json({"projects": found}), PROJECTS_MEDIA_TYPE, PROJECTS_NAME)


def _add_project(projects: dict[str, dict[str, Any]], row: dict[str, Any]) -> None:
    project_id, name = row.get("id"), row.get("name")
    if not isinstance(project_id, str) or not isinstance(name, str) or not name.strip():
        return
    try:
        digest: str | None = manifest_digest(row.get("manifest"))
    except DomainError:
        digest = None  # kept by name: its manifest is refused (and reported) by the import
    slug = row.get("slug")
    projects[project_id] = {
        "name": name.strip(),
        "slug": slug if isinstance(slug, str) else "",
        "manifest": digest,
    }
