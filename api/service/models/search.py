"""Replies of search: a page of the groups found, with the exact total and facets, and the
suggestions offered while a query is typed."""

from __future__ import annotations

from api.service.models import ApiModel, Number

# What a search may ask, here beside its reply so a face can name them without loading the
# service (the CLI's --help). Filters are the facets a reply counts, in the order shown.
FACETS = ("gpu", "source", "dtype", "level", "license", "installable")
# Orders of the groups found (``projections.search.SORT_KEYS``): "relevance", groups whose
# benchmark and GPU carry the most words first, then most matching runs; "runs", most
# matching runs; "newest", the group with the most recently ingested matching run; "name",
# benchmark then GPU. Each ends on the comparison key, so the order is total and pages never
# overlap. No "best metric" order: groups measure different workloads, metrics and units, so
# one group's #1 being faster than another's says nothing (a leaderboard ranks within one).
SORTS = ("relevance", "runs", "newest", "name")
PER_PAGE = 20  # groups per page unless asked otherwise
MAX_PER_PAGE = 100


class SearchTop(ApiModel, kw_only=True):
    """A group's #1 (source-native); all None while nothing in the group is ranked."""

    run: str | None
    name: str | None
    value: Number | None
    unit: str | None


class SearchGroup(ApiModel, kw_only=True):
    comparison_key: str
    benchmark: str | None
    product: str | None
    parts: dict[str, str]  # part of the comparison key -> its readable name
    apart_by: str | None  # what sets it apart from the page's groups that look like it
    runs: int
    matching_runs: int  # its runs that every word and filter match
    top: SearchTop


class FacetValue(ApiModel, kw_only=True):
    value: str
    count: int  # groups of this result that a filter on the value would leave
    selected: bool


class Facet(ApiModel, kw_only=True):
    """One way to narrow the result: ``name`` is the query parameter that filters by it."""

    name: str
    values: list[FacetValue]


class SearchFilters(ApiModel, kw_only=True):
    gpu: str | None
    source: str | None
    dtype: str | None
    level: str | None
    # The implementation's terms: its license as stated ("not stated" when it states none)
    # and whether a build variant says how to install it ("yes" or "no").
    license: str | None = None
    installable: str | None = None


class SearchPage(ApiModel, kw_only=True):
    """A page of the comparison groups a search finds, in ``sort`` order: ``total`` is
    exact, ``pages`` is how many pages of ``per_page`` hold them, ``next`` the page after
    this one (None: this is the last)."""

    query: str
    filters: SearchFilters
    sort: str
    total: int
    page: int
    per_page: int
    pages: int
    next: int | None
    items: list[SearchGroup]
    facets: list[Facet]


class Suggestion(ApiModel, kw_only=True):
    kind: str  # operation, group, gpu or implementation
    text: str
    detail: str | None  # a few words more: runs, GPU
    href: str  # the page it leads to


class Suggestions(ApiModel, kw_only=True):
    query: str
    suggestions: list[Suggestion]
