"""Finding comparison groups among thousands: ``kernelindex search`` and ``/search``.

Every word of the query must occur (case-insensitively, as a substring) in a value a run of
the group carries: its benchmark or operation, GPU product (``B200`` in "NVIDIA B200"), name,
title, source, author, evidence level, external id, and the values of its protocol (harness,
stack version) and workload (axis names and values, dtypes, shapes) manifests. Only values
count: a JSON key such as ``spec``, ``metadata`` or ``name`` matches nothing, except the keys
of the maps whose keys *are* data (axis, tensor, label names...).

Matching is done here in Python, not with SQL ``lower()``/``LIKE``: SQLite's ``lower()``
folds ASCII only, so the same query would find different groups on SQLite and PostgreSQL.
Both sides are folded with :func:`fold` (NFKC and ``str.casefold``), so a search finds the
same groups on both databases. A manifest's folded values are cached per process (by its
text); the run columns are folded once per views position (``projections.search_index``),
and which runs a word matches once per word and position (:func:`word_bits`).

Results are groups (a run of which every word and every filter matches), in one of the
orders of ``SORTS``, with facets: for each value of each filter, how many of the groups found
a filter on it leaves (:func:`find`, over the runs as ``projections.search_index`` keeps them).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.store.read_door import Rows
from projections.search_index import (
    FACETS,
    SORTS,
    Profile,
    SearchIndex,
    products_named,
)
from projections.view_statements import STATEMENTS

MAX_WORDS = 8

# Joins the values of one text. It is whitespace to ``re``'s ``\s`` (query words are split on
# it), so no query word contains it and no match can span two values.
SEPARATOR = "\x1f"

# Manifest fields whose keys are names a person chose (axes, tensors, labels...), so the keys
# are searchable values, unlike the schema's own field names.
_DATA_KEYED_MAPS = frozenset(
    {
        "axes",
        "tensors",
        "scalars",
        "parameters",
        "labels",
        "libraries",
        "environmentVariables",
        "requirements",
        "options",
        "metrics",
    }
)
# Top-level fields every manifest of a kind shares: as words they would match every group.
_BOILERPLATE = frozenset({"apiVersion", "kind"})
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass
class _Folded:
    """A manifest document folded twice: all of its text, keys too (a quick test that no
    value has a word; None where it cannot be made here), and, once some word passed that
    test, its values alone."""

    rough: str | None
    values: str | None = None


class _FoldedManifests:
    """Folded manifests of this process, by document text, not by digest: a digest leaves
    ``metadata`` (the title) out, so one digest can name different documents in different
    ledgers. Past ``budget`` characters (the catalog's take about 4 million) it starts over."""

    def __init__(self, budget: int = 50_000_000) -> None:
        self.budget = budget
        self.entries: dict[str, _Folded] = {}
        self.chars = 0

    def rough(self, document: str) -> _Folded:
        entry = self.entries.get(document)
        if entry is None:
            if self.chars > self.budget:
                self.entries.clear()
                self.chars = 0
            entry = self.entries[document] = _Folded(rough_text(document))
            self.chars += 2 * len(document)
        return entry

    def values(self, document: str, entry: _Folded) -> str:
        if entry.values is None:
            entry.values = manifest_search_text(document)
            self.chars += len(entry.values)
        return entry.values


def fold(text: str) -> str:
    """The form both values and query words are compared in: NFKC, Unicode case folding,
    NFKC again (folding can leave a string unnormalised). ASCII needs only ``lower``."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def query_words(query: str) -> list[str]:
    """The query's words (split on any whitespace), folded; at most ``MAX_WORDS``."""
    return [fold(w) for w in re.split(r"\s+", query.strip()) if w][:MAX_WORDS]


def manifest_values(document: Any) -> list[str]:
    """The values of a manifest as text, each once, in document order: strings and numbers,
    and the keys of data-keyed maps. Schema field names, digests (references, not words)
    and the top-level ``apiVersion``/``kind`` boilerplate are left out."""
    found: dict[str, None] = {}  # an ordered set: a suite repeats its axis names per case
    if isinstance(document, dict):
        document = {k: v for k, v in document.items() if k not in _BOILERPLATE}
    _collect(document, False, found)
    return list(found)


def _collect(node: Any, data_keyed: bool, found: dict[str, None]) -> None:
    # A plain recursive walk: nested generators cost several times more per value.
    if isinstance(node, str):
        if not _DIGEST.fullmatch(node):
            found[node] = None
    elif isinstance(node, dict):
        for key, value in node.items():
            if data_keyed:
                found[str(key)] = None
            elif key.endswith(("Digest", "_digest")):
                continue
            # A data-keyed map's entries are schema objects again (a tensor's dtype, shape).
            _collect(value, not data_keyed and key in _DATA_KEYED_MAPS, found)
    elif isinstance(node, list):
        for item in node:
            _collect(item, False, found)
    elif isinstance(node, bool) or node is None:
        return  # true/false/null say nothing a person would search for
    elif isinstance(node, int):
        found[str(node)] = None
    elif isinstance(node, float):
        found[repr(node)] = None  # as json.dumps (the runner) writes it: see rough_text


def search_text(values: Iterable[str | None]) -> str:
    """One folded text of ``values`` (empty ones skipped), separated by ``SEPARATOR``.
    Folding the joined text equals joining the folded values: the separator is a control
    character that nothing composes or case-folds with."""
    return fold(SEPARATOR.join(v for v in values if v))


def manifest_search_text(document: str) -> str:
    return search_text(manifest_values(json.loads(document)))


def rough_text(document: str) -> str | None:
    """A manifest's JSON text with its escapes undone, folded: every value (and key) is in
    it verbatim, so a word it lacks is in no value. None where undoing the escapes here
    could differ from JSON's (non-ASCII text with escapes, or ``\\/``, which Python's
    ``unicode_escape`` leaves as it is)."""
    if "\\" not in document:
        return fold(document)
    if not document.isascii() or "\\/" in document:
        return None
    # JSON's other escapes are Python's; the UTF-16 round trip joins surrogate pairs.
    decoded = document.encode("ascii").decode("unicode_escape")
    return fold(decoded.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass"))


_FOLDED = _FoldedManifests()


@dataclass
class GroupHit:
    """A group some run of which every word (and every filter) matches."""

    key: str
    benchmark: str | None
    product: str | None
    runs: int = 0  # its matching runs
    headline: int = 0  # most query words a matching run's benchmark and GPU carry
    newest: int = 0  # log position of its most recently ingested matching run


@dataclass(frozen=True)
class Filters:
    """What a search narrows to besides its words: one value per facet, or None."""

    gpu: str | None = None  # a product name as people type it ("b200")
    source: str | None = None
    dtype: str | None = None
    level: str | None = None
    license: str | None = None  # as the implementation states it, or "not stated"
    installable: str | None = None  # "yes" or "no"

    def values(self) -> dict[str, str | None]:
        return {
            "gpu": self.gpu,
            "source": self.source,
            "dtype": self.dtype,
            "level": self.level,
            "license": self.license,
            "installable": self.installable,
        }


@dataclass(frozen=True)
class Hits:
    """Every group found, in the order asked for, and the facets of the runs that matched:
    for each value, how many of those groups a filter on it would leave."""

    groups: list[GroupHit]
    facets: dict[str, dict[str, int]]


FOUND_KEPT = 256  # answers an index keeps: the pages of one query read one answer


def find(index: SearchIndex, query: str, filters: Filters, sort: str) -> Hits:
    """The groups a run of which matches every word of ``query`` and every filter; the
    answer is kept with the index (a query's next page reads it again)."""
    words = query_words(query)
    asked = (tuple(words), filters, sort)
    hits: Hits | None = index.found.get(asked)
    if hits is None:
        hits = _find(index, words, filters, sort)
        if len(index.found) >= FOUND_KEPT:
            index.found.clear()
        index.found[asked] = hits
    return hits


def _find(index: SearchIndex, words: list[str], filters: Filters, sort: str) -> Hits:
    admits = _admits(index, filters)
    heads = []
    matched = -1
    for word in words:
        runs_bits, head_bits = word_bits(index, word)
        matched &= runs_bits
        heads.append(head_bits)
    # Each matching profile: how many of its runs match, and the newest of them.
    counted: dict[int, list[int]] = {}
    if words:
        for run in _set_bits(matched):
            number = index.run_profile[run]
            seen = counted.get(number)
            if seen is None:
                counted[number] = [1, run]
            else:
                seen[0] += 1
                seen[1] = run  # in log order within a profile: the last is the newest
    else:
        counted = {n: [len(p.own), p.start + len(p.own) - 1] for n, p in enumerate(index.profiles)}
    groups: dict[str, GroupHit] = {}
    tokens: dict[str, set[tuple[str, str]]] = {}
    for number, (runs_matched, newest) in counted.items():
        profile = index.profiles[number]
        if not admits(profile):
            continue
        group = groups.get(profile.key)
        if group is None:
            group = groups[profile.key] = GroupHit(profile.key, profile.benchmark, profile.product)
            tokens[profile.key] = set()
        group.runs += runs_matched
        group.headline = max(group.headline, sum(h >> number & 1 for h in heads))
        position = profile.own[newest - profile.start][1]
        group.newest = max(group.newest, position)
        tokens[profile.key].update(profile.facets)
    facets: dict[str, dict[str, int]] = {name: {} for name in FACETS}
    for found in tokens.values():
        for name, value in found:
            facets[name][value] = facets[name].get(value, 0) + 1
    return Hits(
        sorted(groups.values(), key=SORT_KEYS[sort]),
        {name: _counted(index, name, values) for name, values in facets.items()},
    )


def _set_bits(bits: int) -> Iterator[int]:
    """The positions of the bits set in ``bits``, lowest first."""
    while bits:
        lowest = bits & -bits
        yield lowest.bit_length() - 1
        bits ^= lowest


WORDS_KEPT = 4096  # words whose matches an index keeps (a few KiB each)


def word_bits(index: SearchIndex, word: str) -> tuple[int, int]:
    """The runs ``word`` matches (bit i: the index's i-th run) and the profiles whose
    benchmark or GPU carries it (bit i: the i-th profile); worked out once per index."""
    found = index.words.get(word)
    if found is not None:
        return found
    documents: dict[str | None, bool] = {None: False}
    runs_bits = head_bits = 0
    for i, profile in enumerate(index.profiles):
        head = word in profile.headline
        if head:
            head_bits |= 1 << i
        if (
            head
            or _document_has(index, documents, profile.protocol, word)
            or _document_has(index, documents, profile.workload, word)
        ):
            runs_bits |= ((1 << len(profile.own)) - 1) << profile.start
            continue
        for j, (text, _) in enumerate(profile.own):
            if word in text:
                runs_bits |= 1 << (profile.start + j)
    if len(index.words) >= WORDS_KEPT:
        index.words.clear()
    index.words[word] = (runs_bits, head_bits)
    return runs_bits, head_bits


def folded_values(document: str) -> str | None:
    """The folded values of a manifest (kept per process by its text); None when its rough
    text could not be made, and a query parses it then."""
    entry = _FOLDED.rough(document)
    return _FOLDED.values(document, entry) if entry.rough is not None else None


def _document_has(
    index: SearchIndex, seen: dict[str | None, bool], digest: str | None, word: str
) -> bool:
    """Whether a value of a manifest has ``word``, once per manifest. Most have it nowhere:
    the rough text says so and they are never parsed."""
    has = seen.get(digest)
    if has is None:
        document = index.documents.get(str(digest))
        has = False
        if document is not None:
            entry = _FOLDED.rough(document)
            if entry.rough is None or word in entry.rough:
                has = word in _FOLDED.values(document, entry)
        seen[digest] = has
    return has


def _admits(index: SearchIndex, filters: Filters) -> Callable[[Profile], bool]:
    """Whether a profile's runs pass every filter."""
    gpus = products_named(index.products, filters.gpu) if filters.gpu is not None else None
    source = fold(filters.source) if filters.source is not None else None
    dtype = fold(filters.dtype) if filters.dtype is not None else None
    level = fold(filters.level) if filters.level is not None else None
    license = fold(filters.license) if filters.license is not None else None
    installable = fold(filters.installable) if filters.installable is not None else None

    def admits(p: Profile) -> bool:
        return (
            (gpus is None or p.product in gpus)
            and (source is None or fold(p.source) == source)
            and (level is None or p.level == level)
            and (dtype is None or dtype in p.dtypes)
            and (license is None or fold(p.license) == license)
            and (installable is None or p.installable == installable)
        )

    return admits


def _counted(index: SearchIndex, name: str, values: dict[str, int]) -> dict[str, int]:
    """A facet's values with their groups, most first (evidence levels strongest first)."""
    counts = list(values.items())
    if name == "level":
        counts.sort(key=lambda vc: (-index.levels.get(vc[0], 0), vc[0]))
    else:
        counts.sort(key=lambda vc: (-vc[1], vc[0]))
    return dict(counts)


SORT_KEYS: dict[str, Callable[[GroupHit], tuple[Any, ...]]] = {
    "relevance": lambda g: (-g.headline, -g.runs, g.key),
    "runs": lambda g: (-g.runs, g.key),
    "newest": lambda g: (-g.newest, g.key),
    "name": lambda g: (g.benchmark or "", g.product or "", g.key),
}
assert tuple(SORT_KEYS) == SORTS


@dataclass(frozen=True)
class GroupTopRow:
    run: str
    name: str
    value: float
    unit: str | None


def group_tops(rows: Rows, keys: Sequence[str]) -> dict[str, GroupTopRow]:
    """Each group's #1 in the source-native view (``projections.queries.leaders``)."""
    if not keys:  # an empty IN list is not compiled ahead
        return {}
    return {
        str(key): GroupTopRow(str(run), str(name), float(value), str(unit) if unit else None)
        for key, run, value, name, unit in rows.run(STATEMENTS, "group_tops", keys=list(keys))
    }
