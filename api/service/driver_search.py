"""``api.service.search.Search``'s page of groups, read through the driver (issue 33).

The same reads the service makes (``api.service.search_pages``), on the driver's ``Rows``
over views that ``api.service.driver_reads`` found fresh. The service keeps its index of the
views from one search to the next; a command reads once, so it builds the index and drops it.
Its modules are imported by ``groups``: the key list, which opens the same door, loads no
read model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.service.models.search import PER_PAGE

if TYPE_CHECKING:
    from api.service.models.search import SearchFilters, SearchPage
    from ledger.store.read_door import Rows


class DriverSearch:
    """``Search.groups``, read through the driver."""

    def __init__(self, rows: Rows) -> None:
        self.rows = rows

    def groups(
        self,
        query: str = "",
        filters: SearchFilters | None = None,
        *,
        sort: str = "relevance",
        page: int = 1,
        per_page: int = PER_PAGE,
    ) -> SearchPage:
        from api.service.search_pages import asked, groups_page  # noqa: PLC0415 - see above
        from projections.search_index import build_index  # noqa: PLC0415 - as above

        narrowed = asked(query, filters, sort, page, per_page)
        index = build_index(self.rows)
        return groups_page(self.rows, index, query, narrowed, sort, page, per_page)
