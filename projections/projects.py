"""The registry's projects: the KernelIndex catalog's projects with the runs of their
implementations. The link is the catalog's (``domain.importers.catalog_projects``, kept as
an artifact at import); a run is a project's when the implementation its manifests name
(the runs view's ``implementation_digest``) is one of the project's."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select

from domain.importers.catalog_projects import PROJECTS_MEDIA_TYPE, PROJECTS_NAME
from ledger.store.artifacts import artifacts
from ledger.store.event_store import StoreSession
from projections.queries import RUN_LIST_COLUMNS
from projections.records import VIEW
from projections.registry import FacetRow
from projections.rows import RunListRow
from projections.tables import ranks, records, runs

FEW = 500  # implementations looked up by digest rather than by reading every run


@dataclass
class Project:
    """One project as the catalogs imported name it, with its implementations' digests."""

    name: str
    slug: str
    manifest: str | None
    implementations: set[str] = field(default_factory=set)


def projects(session: StoreSession) -> dict[str, Project]:
    """Every project the imported catalogs name (several imports: their union), by the name
    the registry shows: the catalog's display name, or ``name (slug)`` where other projects
    share it. A catalog keys a project by its slug; its name is a display name that
    different people share (the real export has two "steve"s, different KernelBot users),
    so runs are gathered by slug and never credited to a namesake."""
    by_slug: dict[str, Project] = {}
    rows = session.execute(
        select(artifacts.c.content).where(
            artifacts.c.media_type == PROJECTS_MEDIA_TYPE, artifacts.c.name == PROJECTS_NAME
        )
    ).scalars()
    for content in rows:
        for item in json.loads(bytes(content)).get("projects", []):
            name, slug = str(item["name"]), str(item.get("slug") or "")
            # A project without a slug has only its name to be known by.
            project = by_slug.setdefault(
                slug or f"name:{name}", Project(name, slug, item.get("manifest"))
            )
            project.implementations.update(str(d) for d in item.get("implementations", []))
    namesakes = Counter(p.name for p in by_slug.values())
    return {
        (p.name if namesakes[p.name] == 1 or not p.slug else f"{p.name} ({p.slug})"): p
        for p in by_slug.values()
    }


def project_rows(session: StoreSession, known: dict[str, Project]) -> list[FacetRow]:
    """Each project that names a run, with the counts a GPU's or an author's row has; most
    runs first."""
    owner = {d: key for key, p in known.items() for d in p.implementations}
    t = runs.c
    # A few projects' runs are found by their implementations (indexed); all, by a scan.
    chosen = (
        t.implementation_digest.in_(sorted(owner))
        if len(owner) <= FEW
        else t.implementation_digest.is_not(None)
    )
    seen: dict[str, dict[str, Any]] = {}
    query = select(t.implementation_digest, t.comparison_key, t.benchmark, t.product, t.author)
    for digest, key, benchmark, product, author in session.execute(query.where(chosen)):
        name = owner.get(str(digest))
        if name is None:
            continue
        counts = seen.setdefault(
            name, {"runs": 0, "groups": set(), "ops": set(), "gpus": set(), "authors": set()}
        )
        counts["runs"] += 1
        for part, value in (("groups", key), ("ops", benchmark), ("gpus", product)):
            if value is not None:
                counts[part].add(value)
        if author is not None:
            counts["authors"].add(author)
    set_records: dict[str, int] = {}
    joined = runs.join(records, records.c.run_digest == t.run_digest)
    for digest, count in session.execute(
        select(t.implementation_digest, func.count())
        .select_from(joined)
        .where(chosen)
        .group_by(t.implementation_digest)
    ):
        name = owner.get(str(digest))
        if name is not None:
            set_records[name] = set_records.get(name, 0) + int(count)
    holds: dict[str, set[str]] = {}
    firsts = runs.join(ranks, ranks.c.run_digest == t.run_digest)
    for digest, key in session.execute(
        select(t.implementation_digest, ranks.c.comparison_key)
        .select_from(firsts)
        .where(chosen, ranks.c.view == str(VIEW), ranks.c.rank == 1)
    ):
        name = owner.get(str(digest))
        if name is not None:
            holds.setdefault(name, set()).add(str(key))
    rows = [
        FacetRow(
            name=name,
            runs=c["runs"],
            groups=len(c["groups"]),
            operations=len(c["ops"]),
            gpus=len(c["gpus"]),
            authors=len(c["authors"]),
            records=set_records.get(name, 0),
            holds=len(holds.get(name, ())),
        )
        for name, c in seen.items()
    ]
    return sorted(rows, key=lambda r: (-r.runs, r.name))


def project_runs(
    session: StoreSession, project: Project, after: int | None, limit: int
) -> list[RunListRow]:
    """At most ``limit`` runs of the project in log order, after position ``after``."""
    query = select(*RUN_LIST_COLUMNS).where(
        runs.c.implementation_digest.in_(sorted(project.implementations))
    )
    if after is not None:
        query = query.where(runs.c.ingested_position > after)
    query = query.order_by(runs.c.ingested_position).limit(limit)
    return [RunListRow.from_mapping(r) for r in session.execute(query).mappings()]
