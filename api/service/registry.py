"""The registry: runs gathered by GPU, by implementation (its author) and by project (the
KernelIndex catalog's, ``projections.projects``), each with its runs and its records (the
times one of its runs took a group's #1, and whether it holds it now).

Names are exact, as the runs store them ("NVIDIA B200", an author as the implementation's
manifest names them): finding a stored name from what a person types is the GPU-name
matcher's business. A name no run carries is 404.
"""

from __future__ import annotations

from typing import Literal

from api.service.freshness import Views
from api.service.models.registry import (
    ImplementationList,
    ProjectList,
    RecordTimeline,
    RegistryPage,
    RegistrySummary,
)
from api.service.paging import Cursor, next_start, page_size
from api.service.records import FEED_MAX, RecordScope, timeline
from api.service.runs import run_summary
from ledger.errors import NotFoundError
from ledger.store.event_store import StoreSession
from projections.projects import project_rows, project_runs, projects
from projections.registry import Facet, FacetRow, facet_rows, facet_runs, unnamed_runs
from projections.rows import RunListRow

LIST_PAGE = 100  # implementations per page of the list
LIST_MAX = 500
RUNS_PAGE = 50  # runs per page of a GPU's or an author's page
RECORDS_PAGE = 20  # records per page of a GPU's or an author's page

_WHAT: dict[Facet, str] = {"gpu": "GPU", "author": "implementation author"}


class Registry:
    def __init__(self, views: Views) -> None:
        self.views = views

    def gpus(self) -> list[RegistrySummary]:
        """Every GPU the runs name, most runs first."""
        return self.views.read(lambda session: [_summary(r) for r in facet_rows(session, "gpu")])

    def implementations(self, start: int = 1, limit: int = LIST_PAGE) -> ImplementationList:
        """Implementation authors, most runs first: ``limit`` from the ``start``-th."""
        size = page_size(limit, LIST_MAX)

        def read(session: StoreSession) -> ImplementationList:
            every = facet_rows(session, "author")
            shown, following = _window(every, start, size)
            return ImplementationList(
                total=len(every),
                start=start,
                next=following,
                unnamed_runs=unnamed_runs(session, "author"),
                items=[_summary(r) for r in shown],
            )

        return self.views.read(read)

    def gpu(
        self,
        name: str,
        cursor: str | None = None,
        limit: int = RUNS_PAGE,
        before: int | None = None,
        records: int = RECORDS_PAGE,
    ) -> RegistryPage:
        """A GPU's runs (a page in log order, after ``cursor``) and records (a page newest
        first, before ``before``)."""
        return self._page("gpu", name, cursor, limit, before, records)

    def implementation(
        self,
        name: str,
        cursor: str | None = None,
        limit: int = RUNS_PAGE,
        before: int | None = None,
        records: int = RECORDS_PAGE,
    ) -> RegistryPage:
        """An author's runs and records, as :meth:`gpu`."""
        return self._page("author", name, cursor, limit, before, records)

    def projects(self, start: int = 1, limit: int = LIST_PAGE) -> ProjectList:
        """The catalogs' projects that hold runs, most runs first: ``limit`` from the
        ``start``-th."""
        size = page_size(limit, LIST_MAX)

        def read(session: StoreSession) -> ProjectList:
            named = projects(session)
            every = project_rows(session, named)
            shown, following = _window(every, start, size)
            return ProjectList(
                total=len(every),
                start=start,
                next=following,
                named=len(named),
                items=[_summary(r) for r in shown],
            )

        return self.views.read(read)

    def project(
        self,
        name: str,
        cursor: str | None = None,
        limit: int = RUNS_PAGE,
        before: int | None = None,
        records: int = RECORDS_PAGE,
    ) -> RegistryPage:
        """A project's runs and records, as :meth:`gpu` (the runs of its implementations)."""
        after, size, shown = _paging(cursor, limit, records)

        def read(session: StoreSession) -> RegistryPage:
            project = projects(session).get(name)
            found = project_rows(session, {name: project}) if project is not None else []
            if project is None or not found:
                raise NotFoundError(f"no run is of a project named {name!r}")
            rows = project_runs(session, project, after, size + 1)
            scope = RecordScope(implementations=tuple(sorted(project.implementations)))
            dated = timeline(session, scope, before, shown)
            return _registry_page("project", name, found[0], rows, size, dated)

        return self.views.read(read)

    def _page(
        self,
        facet: Facet,
        name: str,
        cursor: str | None,
        limit: int,
        before: int | None,
        records: int,
    ) -> RegistryPage:
        after, size, shown = _paging(cursor, limit, records)

        def read(session: StoreSession) -> RegistryPage:
            # No stored name holds NUL (PostgreSQL's text cannot): not one to look up.
            found = facet_rows(session, facet, name) if "\x00" not in name else []
            if not found:
                raise NotFoundError(f"no run names the {_WHAT[facet]} {name!r}")
            rows = facet_runs(session, facet, name, after, size + 1)
            gpu = facet == "gpu"
            scope = RecordScope(None, name, None) if gpu else RecordScope(None, None, name)
            dated = timeline(session, scope, before, shown)
            kind: PageKind = "gpu" if gpu else "implementation"
            return _registry_page(kind, name, found[0], rows, size, dated)

        return self.views.read(read)


PageKind = Literal["gpu", "implementation", "project"]


def _paging(cursor: str | None, limit: int, records: int) -> tuple[int | None, int, int]:
    """A registry page's request: the runs after the cursor's position, how many runs, and
    how many records."""
    after = Cursor.decode(cursor).after if cursor is not None else None
    return after, page_size(limit), max(1, min(records, FEED_MAX))


def _registry_page(
    kind: PageKind,
    name: str,
    found: FacetRow,
    rows: list[RunListRow],
    size: int,
    records: RecordTimeline,
) -> RegistryPage:
    """The page of ``rows`` (read one past ``size``, to know whether another page follows)."""
    shown = rows[:size]
    more = len(rows) > size and shown
    return RegistryPage(
        kind=kind,
        name=name,
        summary=_summary(found),
        runs=[run_summary(r) for r in shown],
        runs_next=Cursor(shown[-1].ingested_position).encode() if more else None,
        records=records,
    )


def _window(every: list[FacetRow], start: int, size: int) -> tuple[list[FacetRow], int | None]:
    """The ``size`` rows from the ``start``-th (1-based), and where the next page starts."""
    return every[start - 1 : start - 1 + size], next_start(start, size, len(every))


def _summary(row: FacetRow) -> RegistrySummary:
    return RegistrySummary(
        name=row.name,
        runs=row.runs,
        groups=row.groups,
        operations=row.operations,
        gpus=row.gpus,
        authors=row.authors,
        records=row.records,
        holds=row.holds,
    )
