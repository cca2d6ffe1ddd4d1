"""Search, once for every face: ``GET /v1/search``, the ``/search`` page and
``kernelindex search`` all ask :meth:`Search.groups`; the suggestions the page offers as a
query is typed come from :meth:`Search.suggest`.

A search answers the comparison groups that a run matches: every word of the query
(``projections.search`` says what a word matches) and every filter (GPU, source, dtype,
evidence level). The reply has the exact total, one page of the groups in a stable order,
and facets: for each value of each filter, how many of the groups found a filter on it
would leave.

The runs are read once per views position into an index (``projections.search_index``) that
this object keeps: a write moves the position and the next search builds a new one.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from itertools import islice
from math import ceil
from urllib.parse import quote

from api.service.errors import BadQueryError
from api.service.freshness import Views
from api.service.models.search import (
    FACETS,
    MAX_PER_PAGE,
    PER_PAGE,
    SORTS,
    Facet,
    FacetValue,
    SearchFilters,
    SearchGroup,
    SearchPage,
    SearchTop,
    Suggestion,
    Suggestions,
)
from domain.errors import DomainError
from domain.evidence import EvidenceLevel
from domain.implementation_terms import INSTALLABLE
from ledger.store.event_store import StoreSession
from projections.group_labels import group_labels
from projections.queries import rows_of
from projections.search import MAX_WORDS, Filters, Hits, find, fold, group_tops, query_words
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

MAX_PAGE = 10_000
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
        position = views_position(session)
        index = self._index
        if index is not None and index.position == position:
            return index
        with self._building:  # one build per position, however many requests wait for it
            index = self._index
            if index is None or index.position != position:
                fingerprint = search_fingerprint(session)
                if index is not None and index.fingerprint == fingerprint:
                    index = dataclasses.replace(index, position=position)
                else:
                    index = build_index(session)
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
        narrowed = _filters(filters or SearchFilters(gpu=None, source=None, dtype=None, level=None))
        if sort not in SORTS:
            raise BadQueryError(f"unknown sort {sort!r}; one of {', '.join(SORTS)}")
        if not 1 <= per_page <= MAX_PER_PAGE:
            raise BadQueryError(f"perPage must be 1 to {MAX_PER_PAGE}, not {per_page}")
        if not 1 <= page <= MAX_PAGE:
            raise BadQueryError(f"page must be 1 to {MAX_PAGE}, not {page}")
        if len(query_words(query)) < len(query.split()):
            raise BadQueryError(f"at most {MAX_WORDS} words: every word must match")

        def read(session: StoreSession) -> SearchPage:
            hits = find(self.index(session), query, narrowed, sort)
            return _page(session, query, narrowed, sort, hits, page, per_page)

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


def _filters(asked: SearchFilters) -> Filters:
    """The filters asked for (blank ones are none); an unknown evidence level is refused."""
    gpu, source, dtype, level, license, installable = (
        v.strip() if v and v.strip() else None
        for v in (
            asked.gpu,
            asked.source,
            asked.dtype,
            asked.level,
            asked.license,
            asked.installable,
        )
    )
    if level is not None:
        try:
            level = EvidenceLevel.parse(level).label
        except DomainError as exc:
            raise BadQueryError(exc.message) from None
    if installable is not None and installable.lower() not in INSTALLABLE:
        raise BadQueryError(f"installable is {' or '.join(INSTALLABLE)}, not {installable!r}")
    return Filters(
        gpu=gpu,
        source=source,
        dtype=dtype,
        level=level,
        license=license,
        installable=installable.lower() if installable is not None else None,
    )


def _most(
    counts: dict[str, int], wanted: Callable[[str], bool], most: int
) -> list[tuple[str, int]]:
    chosen = [(name, n) for name, n in counts.items() if wanted(name)]
    return sorted(chosen, key=lambda nc: (-nc[1], nc[0]))[:most]


def _page(
    session: StoreSession,
    query: str,
    filters: Filters,
    sort: str,
    hits: Hits,
    page: int,
    per_page: int,
) -> SearchPage:
    total = len(hits.groups)
    pages = max(1, ceil(total / per_page))
    if page > pages:
        raise BadQueryError(
            f"page {page} is past the last: {total} groups make {pages} page(s) of {per_page}"
        )
    shown = hits.groups[(page - 1) * per_page : page * per_page]
    keys = [g.key for g in shown]
    labels = {label.key: label for label in group_labels(rows_of(session), keys)}
    tops = group_tops(session, keys)
    every = list(labels.values())
    items = []
    for g in shown:
        label = labels[g.key]
        alike = label.lookalikes(every)
        top = tops.get(g.key)
        items.append(
            SearchGroup(
                comparison_key=g.key,
                benchmark=g.benchmark,
                product=g.product,
                parts=label.parts,
                apart_by=label.separated_by(alike) if alike else None,
                runs=label.runs,
                matching_runs=g.runs,
                top=SearchTop(
                    run=top.run if top else None,
                    name=top.name if top else None,
                    value=top.value if top else None,
                    unit=top.unit if top else None,
                ),
            )
        )
    chosen = filters.values()
    return SearchPage(
        query=query,
        filters=SearchFilters(**chosen),
        sort=sort,
        total=total,
        page=page,
        per_page=per_page,
        pages=pages,
        next=page + 1 if page < pages else None,
        items=items,
        facets=[
            Facet(
                name=name,
                values=[
                    FacetValue(value=v, count=n, selected=_selected(name, v, chosen[name]))
                    for v, n in hits.facets[name].items()
                ],
            )
            for name in FACETS
        ],
    )


def _selected(name: str, value: str, chosen: str | None) -> bool:
    if chosen is None:
        return False
    if name == "gpu":
        return value in products_named([value], chosen)
    return fold(value) == fold(chosen)
