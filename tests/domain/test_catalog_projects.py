"""The catalog's projects with their implementations (``domain.importers.catalog_projects``):
the link only the catalog's rows hold (``implementations.projectId``), kept as one artifact."""

from __future__ import annotations

import json
from typing import Any

from domain.importers.catalog_projects import (
    PROJECTS_MEDIA_TYPE,
    PROJECTS_NAME,
    catalog_projects,
)

PROJECT_MANIFEST = {
    "apiVersion": "kernelindex.dev/v1alpha1",
    "kind": "SoftwareProject",
    "metadata": {"name": "sol-user-geometric"},
    "spec": {"name": "Geometric", "host": {"kind": "other", "id": "sol-execbench/user/Geometric"}},
}


def _line(table: str, row: dict[str, Any]) -> bytes:
    return json.dumps({"table": table, "row": row}).encode()


def test_each_project_is_kept_with_the_implementations_its_rows_name() -> None:
    lines = [
        _line(
            "projects", {"id": "p1", "name": "Geometric", "slug": "g", "manifest": PROJECT_MANIFEST}
        ),
        _line("projects", {"id": "p2", "name": "Alone", "slug": "a", "manifest": {"kind": "x"}}),
        _line("projects", {"id": "p3", "name": " ", "slug": "blank"}),  # no name: not a project
        b"not json",  # the import reports it; it names no project
        b"",
        _line(
            "implementations", {"id": "i1", "projectId": "p1", "implementationDigest": "sha256:b"}
        ),
        _line(
            "implementations", {"id": "i2", "projectId": "p1", "implementationDigest": "sha256:a"}
        ),
        _line(
            "implementations", {"id": "i3", "projectId": "p9", "implementationDigest": "sha256:c"}
        ),
        _line("benchmark_runs", {"id": "r1", "implementationId": "i1"}),
    ]
    kept = catalog_projects(lines)
    assert kept is not None
    assert (kept.media_type, kept.name) == (PROJECTS_MEDIA_TYPE, PROJECTS_NAME)
    projects = json.loads(kept.content)["projects"]
    assert [p["name"] for p in projects] == ["Alone", "Geometric"]
    alone, geometric = projects
    assert geometric["implementations"] == ["sha256:a", "sha256:b"]
    assert geometric["manifest"].startswith("sha256:") and geometric["slug"] == "g"
    assert alone["implementations"] == [] and alone["manifest"] is None  # refused manifest


def test_an_export_without_projects_keeps_nothing() -> None:
    assert catalog_projects([_line("sources", {"id": "s", "slug": "x"})]) is None
