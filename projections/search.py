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
text); the run columns are folded on each search: a few tens of milliseconds for the 7,800
runs of the catalog. (A folded column written at fold time would make this an SQL ``LIKE``;
it needs a schema version and a refold.)

Results are groups, those whose benchmark and GPU carry the most query words first, then the
most matching runs, then by comparison key (a stable order), each with its label and its #1
in the source-native view.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from domain.ranking import View
from ledger.store.event_store import StoreSession
from projections.group_labels import GroupLabel, group_labels
from projections.queries import leaders
from projections.tables import manifests, ranks, runs

MAX_WORDS = 8
MAX_GROUPS = 50

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


@dataclass(frozen=True)
class Found:
    label: GroupLabel
    runs: int
    top_run: str | None
    top_name: str | None
    top_value: float | None
    unit: str | None


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


def _manifest_masks(
    session: StoreSession, digests: set[str], words: Sequence[str]
) -> dict[str, int]:
    """Which words (bits, as :func:`_matched`) the values of each manifest named have.
    Most documents have none of the words anywhere: the rough text says so and they are
    never parsed."""
    ordered = sorted(digests)
    masks: dict[str, int] = {}
    for start in range(0, len(ordered), 500):
        for digest, document in session.execute(
            select(manifests.c.digest, manifests.c.document).where(
                manifests.c.digest.in_(ordered[start : start + 500])
            )
        ).tuples():
            entry = _FOLDED.rough(document)
            if entry.rough is not None and not _matched(entry.rough, words):
                continue
            masks[digest] = _matched(_FOLDED.values(document, entry), words)
    return masks


_FOLDED = _FoldedManifests()


def _matched(text: str, words: Sequence[str]) -> int:
    """Bit i set where word i occurs in ``text``."""
    mask = 0
    for i, word in enumerate(words):
        if word in text:
            mask |= 1 << i
    return mask


@dataclass
class _Group:
    runs: int = 0
    headline: int = 0  # most query words a matching run's benchmark and GPU carry


def _matching_groups(session: StoreSession, words: Sequence[str]) -> dict[str, _Group]:
    """Comparison key -> how many of its runs every word matches (and how well)."""
    found = session.execute(
        select(
            runs.c.comparison_key,
            runs.c.benchmark,
            runs.c.product,
            runs.c.protocol_digest,
            runs.c.workload_digest,
            runs.c.name,
            runs.c.title,
            runs.c.source,
            runs.c.author,
            runs.c.evidence_level,
            runs.c.external_id,
        ).where(runs.c.comparison_key.is_not(None))
    )
    rows = list(found.tuples())
    # Manifests, benchmarks and GPUs are shared by many runs: match each once.
    shared = _manifest_masks(session, {str(d) for r in rows for d in r[3:5] if d}, words)
    headlines: dict[tuple[str | None, str | None], int] = {}
    everything = (1 << len(words)) - 1
    groups: dict[str, _Group] = {}
    for key, benchmark, product, protocol, workload, *own in rows:
        headline = headlines.get((benchmark, product))
        if headline is None:
            headline = headlines[benchmark, product] = _matched(
                search_text((benchmark, product)), words
            )
        mask = headline | shared.get(protocol, 0) | shared.get(workload, 0)
        if mask != everything:
            mask |= _matched(search_text(own), words)
            if mask != everything:
                continue
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group()
        group.runs += 1
        group.headline = max(group.headline, headline.bit_count())
    return groups


def search_groups(session: StoreSession, query: str, limit: int = MAX_GROUPS) -> list[Found]:
    words = query_words(query)
    if not words:
        return []
    groups = _matching_groups(session, words)
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1].headline, -kv[1].runs, kv[0]))
    counted = ranked[:limit]
    keys = [key for key, _ in counted]
    labels = {label.key: label for label in group_labels(session, keys)}
    first = leaders()
    tops = {
        str(r.comparison_key): r
        for r in session.execute(
            select(
                first.c.comparison_key, first.c.run_digest, ranks.c.value, runs.c.name, runs.c.unit
            )
            .join(
                ranks,
                (ranks.c.run_digest == first.c.run_digest)
                & (ranks.c.view == str(View.SOURCE_NATIVE)),
            )
            .join(runs, runs.c.run_digest == first.c.run_digest)
            .where(first.c.comparison_key.in_(keys))
        )
    }
    found = []
    for key, group in counted:
        top = tops.get(key)
        found.append(
            Found(
                label=labels[key],
                runs=group.runs,
                top_run=str(top.run_digest) if top is not None else None,
                top_name=str(top.name) if top is not None else None,
                top_value=float(top.value) if top is not None else None,
                unit=str(top.unit) if top is not None and top.unit else None,
            )
        )
    return found
