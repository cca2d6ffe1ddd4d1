"""The runs as search reads them: folded once per views position, then queried in memory.

``projections.search`` says what a word matches. Reading and folding every run's columns
for each query cost tens of milliseconds on the catalog, and facets (GPU, source, dtype,
evidence level) and an exact total need every matching run anyway, so the runs are read
once per position of the views into a :class:`SearchIndex` (a few hundred milliseconds on
the catalog's 7,800 runs) and each query walks it: no SQL but the page's labels and #1s.

The index is a function of the views at one position: whoever keeps it (the service) keys
it by that position. Most writes (attestations, claims, key events) change nothing a search
reads, so a new position first compares the runs' :func:`search_fingerprint`: the index is
rebuilt only when that moved (a new run, a changed evidence level, a manifest attached).

Every read is a generated statement (``projections.view_queries``) run on a ``Rows``
(``ledger.store.read_door``): the service's session connection, or a short command's driver
connection (issue 33). No SQLAlchemy here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from domain.gpu_names import match_gpu
from domain.implementation_terms import NOT_STATED, is_installable, license_of
from ledger.store.read_door import Rows
from projections.view_statements import STATEMENTS

_CHUNK = 500  # values per IN (...) list

# Filters a query may narrow by (the facets a reply counts, in the order shown) and the
# orders of its groups; the service's reply models name the same (api/service/models/search).
FACETS = ("gpu", "source", "dtype", "level", "license", "installable")
SORTS = ("relevance", "runs", "newest", "name")


@dataclass
class Profile:
    """The runs of one group that look alike to a search: same benchmark and GPU, protocol
    and workload, source and evidence level. A query matches the shared part once; only
    where that leaves words unmatched are the runs' own columns read."""

    key: str
    benchmark: str | None
    product: str | None
    source: str
    level: str
    headline: str  # benchmark and GPU, folded
    protocol: str | None
    workload: str | None
    dtypes: tuple[str, ...] = ()
    # Its implementation's terms (``domain.implementation_terms``): runs that differ in them
    # are profiles apart, so that a filter on them admits exactly their runs.
    license: str = NOT_STATED
    installable: str = "no"
    facets: tuple[tuple[str, str], ...] = ()  # (facet, value) pairs its runs count under
    own: list[tuple[str, int]] = field(default_factory=list)  # each run's folded columns, position
    newest: int = 0
    start: int = 0  # its runs are bits start.. of a run mask (``SearchIndex.word``)


@dataclass
class SearchIndex:
    """Every grouped run's searchable text and facet values, at one views position."""

    position: int
    profiles: list[Profile]
    documents: dict[str, str]  # protocol and workload manifests by digest
    levels: dict[str, int]  # evidence level -> its order (weakest first)
    # Distinct names for suggestions: benchmarks and GPUs with their runs, a run per name.
    benchmarks: dict[str, int] = field(default_factory=dict)
    products: dict[str, int] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    # word -> (the runs it matches, as bits; the profiles whose benchmark or GPU has it)
    words: dict[str, tuple[int, int]] = field(default_factory=dict)
    run_profile: list[int] = field(default_factory=list)  # run i is in profile run_profile[i]
    # Run names folded, with " " for every separator and before the first part: a typed
    # prefix is found as " " + the prefix, from the start of any part of a name.
    name_parts: list[tuple[str, str]] = field(default_factory=list)
    found: dict[Any, Any] = field(default_factory=dict)  # answers kept (projections.search)
    fingerprint: tuple[int, ...] = ()  # search_fingerprint of the views it was built from


def views_position(rows: Rows) -> int:
    """The position of the last event folded into the views (0: none yet)."""
    found = rows.run(STATEMENTS, "search_position")
    return int(found[0][0]) if found and found[0][0] is not None else 0


def search_fingerprint(rows: Rows) -> tuple[int, ...]:
    """What changes whenever anything the index reads does: the grouped runs (how many, the
    newest), their evidence (every change of a level is caused by a newer event, so the sum
    of the positions that caused them moves, as does the sum of the levels' orders), and the
    manifests held. The other columns it reads are fixed once a run is ingested."""
    (grouped,) = rows.run(STATEMENTS, "search_fingerprint_runs")
    (held,) = rows.run(STATEMENTS, "search_fingerprint_manifests")
    return tuple(int(v) for v in (*grouped, *held))


def build_index(rows: Rows) -> SearchIndex:
    # Imported here: projections.search imports this module for its index.
    from projections.search import folded_values, search_text  # noqa: PLC0415

    grouped = rows.run(STATEMENTS, "search_runs")
    terms = implementation_terms(rows, {row[-1] for row in grouped if row[-1] is not None})
    documents: dict[str, str] = {}
    dtypes: dict[str, tuple[str, ...]] = {}
    profiles: dict[tuple[Any, ...], Profile] = {}
    headlines: dict[tuple[str | None, str | None], str] = {}
    index = SearchIndex(
        views_position(rows), [], documents, {}, fingerprint=search_fingerprint(rows)
    )
    for (key, benchmark, product, source, level, order, name, position, protocol, workload,
         title, author, external_id, digest, implementation) in grouped:  # fmt: skip
        license, installable = terms.get(implementation, UNSTATED_TERMS)
        alike = (key, benchmark, product, source, level, protocol, workload, license, installable)
        profile = profiles.get(alike)
        if profile is None:
            headline = headlines.get((benchmark, product))
            if headline is None:
                headline = headlines[benchmark, product] = search_text((benchmark, product))
            profile = profiles[alike] = Profile(
                key=str(key),
                benchmark=benchmark,
                product=product,
                source=str(source),
                level=str(level),
                headline=headline,
                protocol=protocol,
                workload=workload,
                license=license,
                installable=installable,
            )
            index.levels[str(level)] = int(order)
        profile.own.append(
            (search_text((name, title, source, author, level, external_id)), position)
        )
        profile.newest = max(profile.newest, int(position))
        if benchmark:
            index.benchmarks[benchmark] = index.benchmarks.get(benchmark, 0) + 1
        if product:
            index.products[product] = index.products.get(product, 0) + 1
        index.names.setdefault(str(name), str(digest))
    index.profiles = list(profiles.values())
    start = 0
    for number, p in enumerate(index.profiles):
        p.start = start
        start += len(p.own)
        index.run_profile += [number] * len(p.own)
    index.name_parts = sorted((name_parts(name), name) for name in index.names)
    # Each manifest's values folded now, not by the first query with a word its text has:
    # kept per process by text, so a later build (after a write) reuses them.
    for document in documents.values():
        folded_values(document)
    digests = sorted({d for p in index.profiles for d in (p.protocol, p.workload) if d})
    for start in range(0, len(digests), _CHUNK):
        found = rows.run(STATEMENTS, "manifest_documents", digests=digests[start : start + _CHUNK])
        documents.update((str(digest), str(document)) for digest, _, document in found)
    for p in index.profiles:
        if p.workload is not None and p.workload in documents:
            if p.workload not in dtypes:
                dtypes[p.workload] = dtypes_of(json.loads(documents[p.workload]))
            p.dtypes = dtypes[p.workload]
        shown = (("gpu", p.product), ("source", p.source), ("level", p.level))
        p.facets = (
            tuple((f, v) for f, v in shown if v)
            + tuple(("dtype", d) for d in p.dtypes)
            + (("license", p.license), ("installable", p.installable))
        )
    return index


UNSTATED_TERMS = (NOT_STATED, "no")  # a run whose implementation manifest is not held


def implementation_terms(rows: Rows, digests: set[str]) -> dict[str, tuple[str, str]]:
    """License (or "not stated") and "yes"/"no" installable of each implementation the views
    hold, by digest. Most manifests state neither: their text says so without parsing."""
    found: dict[str, tuple[str, str]] = {}
    wanted = sorted(digests)
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        for digest, _, document in rows.run(STATEMENTS, "manifest_documents", digests=chunk):
            if '"licensing"' not in document and '"buildVariants"' not in document:
                found[str(digest)] = UNSTATED_TERMS
                continue
            manifest = json.loads(document)
            found[str(digest)] = (
                license_of(manifest) or NOT_STATED,
                "yes" if is_installable(manifest) else "no",
            )
    return found


def dtypes_of(document: Any) -> tuple[str, ...]:
    """The dtypes a workload names (its tensors', or a ``dtype`` axis or field anywhere),
    lower case, sorted, each once."""
    found: set[str] = set()
    _dtypes(document, found)
    return tuple(sorted(found))


def _dtypes(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("dtype", "dtypes"):
                values = value if isinstance(value, list) else [value]
                found.update(v.lower() for v in values if isinstance(v, str) and v)
            else:
                _dtypes(value, found)
    elif isinstance(node, list):
        for item in node:
            _dtypes(item, found)


def products_named(products: Iterable[str], wanted: str) -> set[str]:
    """The products a typed GPU name names (``domain.gpu_names``, the one matcher): the
    one it matches, or every candidate when it could mean several (a search narrows to
    any of them; its GPU facet then lists each)."""
    matched = match_gpu(wanted, products)
    return {matched.name} if matched.name is not None else set(matched.candidates)


_SEPARATORS = re.compile(r"[-_./:\s]+")


def name_parts(text: str) -> str:
    """``text`` folded, its separators one space, with a space before it (see ``name_parts``
    of :class:`SearchIndex`)."""
    from projections.search import fold  # noqa: PLC0415 - it imports this module

    return " " + _SEPARATORS.sub(" ", fold(text))
