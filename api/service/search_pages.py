"""A search's page of comparison groups, read once for every door (issue 33).

:class:`api.service.search.Search` (the server, a full command) and
``api.service.driver_search`` (a short command, through the driver) both check what is
asked with :func:`asked` and answer with :func:`groups_page`: the same reads, on whatever
``Rows`` (``ledger.store.read_door``) holds the connection, over an index of the views
(``projections.search_index``). Imports no SQLAlchemy and no ledger application.
"""

from __future__ import annotations

from math import ceil

from api.service.models.search import (
    FACETS,
    MAX_PER_PAGE,
    SORTS,
    Facet,
    FacetValue,
    SearchFilters,
    SearchGroup,
    SearchPage,
    SearchTop,
)
from api.service.query_errors import BadQueryError
from domain.errors import DomainError
from domain.evidence import EvidenceLevel
from domain.implementation_terms import INSTALLABLE
from ledger.store.read_door import Rows
from projections.group_labels import group_labels
from projections.search import MAX_WORDS, Filters, Hits, find, fold, group_tops, query_words
from projections.search_index import SearchIndex, products_named

MAX_PAGE = 10_000


def asked(
    query: str, filters: SearchFilters | None, sort: str, page: int, per_page: int
) -> Filters:
    """The filters a search asks for, once the question is known good. Refused
    (``BadQueryError``): an unknown sort or evidence level, a page size outside 1..100, a
    page before the first or past ``MAX_PAGE``, more than ``MAX_WORDS`` words."""
    narrowed = _filters(filters or SearchFilters(gpu=None, source=None, dtype=None, level=None))
    if sort not in SORTS:
        raise BadQueryError(f"unknown sort {sort!r}; one of {', '.join(SORTS)}")
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise BadQueryError(f"perPage must be 1 to {MAX_PER_PAGE}, not {per_page}")
    if not 1 <= page <= MAX_PAGE:
        raise BadQueryError(f"page must be 1 to {MAX_PAGE}, not {page}")
    if len(query_words(query)) < len(query.split()):
        raise BadQueryError(f"at most {MAX_WORDS} words: every word must match")
    return narrowed


def groups_page(
    rows: Rows,
    index: SearchIndex,
    query: str,
    filters: Filters,
    sort: str,
    page: int,
    per_page: int,
) -> SearchPage:
    """The page ``asked`` for: the groups ``index`` finds, labelled and with their #1s as
    ``rows`` reads them (refused: a page past the last)."""
    return _page(rows, query, filters, sort, find(index, query, filters, sort), page, per_page)


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


def _page(
    rows: Rows,
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
    labels = {label.key: label for label in group_labels(rows, keys)}
    tops = group_tops(rows, keys)
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
