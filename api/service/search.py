"""Search, once for every face: ``GET /v1/search``, the ``/search`` page and
``kernelindex search`` all ask :meth:`Search.groups`; the suggestions the page offers as a
query is typed come from :meth:`Search.suggest`.

A search answers the comparison groups that a run matches: every word of the query
(``projections.search`` says what a word matches) and every filter (GPU, source, dtype,
evidence level). The reply has the exact total, one page of the groups in a stable order,
and facets: for each value of each filter, how many of the groups found a filter on it
would leave.

The runs are read once per views position into an index (``projections.search_index``) that
this object keeps: a write moves the position and the next search builds a new one. What
is asked and the page answered are ``api.service.search_pages``'s, which a short command's
read through the driver calls too (``api.service.driver_search``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from itertools import islice
from urllib.parse import quote

from api.service.freshness import Views
from api.service.models.search import (
    FACETS,
    MAX_PER_PAGE,
    PER_PAGE,
    SORTS,
    SearchFilters,
    SearchPage,
    Suggestion,
    Suggestions,
)
from api.service.search_pages import asked, groups_page
from ledger.store.event_store import StoreSession
from projections.queries import rows_of
from projections.search import Filters, find, fold
from projections.search_index import FACETS as INDEX_FACETS
from projections.search_index import SORTS as INDEX_SORTS
from projections.search_index import (
    SearchIndex,
    build_index,
    name_parts,
    products_named,
    search_fingerprint,
    views_position,
)

SUGGESTIONS = 8  # at most, all kinds together
SUGGEST_MIN_CHARS = 2  # a single letter suggests too much to mean anything

__all__ = ["FACETS", "MAX_PER_PAGE", "PER_PAGE", "SORTS", "Search"]
# One list of each, whichever layer names it.
assert (FACETS, SORTS) == (INDEX_FACETS, INDEX_SORTS)


class Search:
    def __init__(self, views: Views) -> None:
        self.views = views
        self._index: SearchIndex | None = None
        self._building = threading.Lock()

    def index(self, session: StoreSession) -> SearchIndex:
        """The index of the views this snapshot reads: the last one while the views have not
        moved, or moved without changing anything a search reads (an attestation); else
        built again (``projections.search_index``)."""
        rows = rows_of(session)
        position = views_position(rows)
        index = self._index
        if index is not None and index.position == position:
            return index
        with self._building:  # one build per position, however many requests wait for it
            index = self._index
            if index is None or index.position != position:
                fingerprint = search_fingerprint(rows)
                if index is not None and index.fingerprint == fingerprint:
                    index = dataclasses.replace(index, position=position)
                else:
                    index = build_index(rows)
                self._index = index
        return index

    def groups(
        self,
        query: str = "",
        filters: SearchFilters | None = None,
        *,
        sort: str = "relevance",
        page: int = 1,
        per_page: int = PER_PAGE,
    ) -> SearchPage:
        """A page of the groups ``query`` and the filters find. Refused (``BadQueryError``):
        an unknown sort or evidence level, a page size outside 1..100, a page before the
        first or after the last."""
        narrowed = asked(query, filters, sort, page, per_page)

        def read(session: StoreSession) -> SearchPage:
            index = self.index(session)
            return groups_page(rows_of(session), index, query, narrowed, sort, page, per_page)

        return self.views.read(read)

    def suggest(self, query: str) -> Suggestions:
        """What ``query`` (as typed so far) may be heading for: operations, GPUs, groups
        and implementations whose names hold it, the most runs first."""
        text = fold(query.strip())
        if len(text) < SUGGEST_MIN_CHARS:
            return Suggestions(query=query, suggestions=[])

        def read(session: StoreSession) -> list[Suggestion]:
            index = self.index(session)
            found: list[Suggestion] = []
            gpus = products_named(index.products, query)
            for product, count in _most(index.products, lambda p: p in gpus, 2):
                found.append(
                    Suggestion(
                        kind="gpu",
                        text=product,
                        detail=f"{count} runs",
                        href=f"/search?gpu={quote(product)}",
                    )
                )
            for benchmark, count in _most(index.benchmarks, lambda b: text in fold(b), 3):
                found.append(
                    Suggestion(
                        kind="operation",
                        text=benchmark,
                        detail=f"{count} runs",
                        href=f"/operations/{quote(benchmark, safe='/')}",
                    )
                )
            hits = find(index, query, Filters(), "relevance").groups[:2]
            for g in hits:
                found.append(
                    Suggestion(
                        kind="group",
                        text=f"{g.benchmark} · {g.product}",
                        detail=f"{g.runs} matching runs",
                        href=f"/leaderboards/{quote(g.key, safe=':')}",
                    )
                )
            # From the start of a part of the name: "b20" is in many digests' hex tails.
            typed = name_parts(query.strip())
            named = (name for parts, name in index.name_parts if typed in parts)
            for name in islice(named, max(1, SUGGESTIONS - len(found))):
                found.append(
                    Suggestion(
                        kind="implementation",
                        text=name,
                        detail=None,
                        href=f"/runs/{quote(index.names[name], safe=':')}",
                    )
                )
            return found[:SUGGESTIONS]

        return Suggestions(query=query, suggestions=self.views.read(read))


def _most(
    counts: dict[str, int], wanted: Callable[[str], bool], most: int
) -> list[tuple[str, int]]:
    chosen = [(name, n) for name, n in counts.items() if wanted(name)]
    return sorted(chosen, key=lambda nc: (-nc[1], nc[0]))[:most]
