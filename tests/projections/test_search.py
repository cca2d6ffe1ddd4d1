"""``kernelindex search`` (``projections.search``) on SQLite and PostgreSQL: what a person
finds for a query, over the SOL 056 demo cohort and runs made to test words with.

Every word must match a *value* a run carries (never a JSON key such as ``spec``), as a
substring, Unicode case-insensitively and the same on both databases; LIKE's wildcards are
plain characters; groups whose benchmark and GPU carry the words come first. Hypothesis
properties over random values, on both databases: a word taken from a value, in any case,
finds its group (and only groups with a value that has it); a word that is in no value (a
key, say) finds nothing. And one without a database: the quick text test that lets a search
skip parsing a manifest never skips one that has the word in a value.
"""

from __future__ import annotations

import copy
import hashlib
import json
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from projection_world import GROUP, MANIFESTS, RUN_15149, SEED, World
from sqlalchemy import Engine, create_engine, insert
from sqlalchemy.orm import Session

import api.service.search
from api.service.errors import BadQueryError
from api.service.freshness import Views
from api.service.models import to_builtins
from api.service.models.search import SearchFilters, SearchPage
from api.service.search import MAX_PER_PAGE, SORTS, Search
from domain.manifests.canonical_form import manifest_digest
from ledger.signing.authoring import ingestion_envelope
from projections.queries import rows_of
from projections.search import Filters, find, fold, manifest_values, rough_text
from projections.search_index import build_index
from projections.tables import manifests, runs

# What the cohort's groups are told apart by: the SOL stack version of their protocol.
V1_1 = GROUP

# Keys of the cohort's manifests that no value contains: as words they must find nothing.
JSON_KEYS = (
    "spec",
    "metadata",
    "name",
    "axes",
    "cases",
    "apiVersion",
    "kind",
    "externalId",
    "workloadDigest",
    "comparability",
    "primaryStatistic",
    "sourceNative",
)


def search(world: World, query: str) -> list[dict[str, Any]]:
    """The groups ``kernelindex search --json`` answers with (after catching up)."""
    return list(to_builtins(Search(Views(world.ledger)).groups(query, per_page=100))["items"])


def keys(world: World, query: str) -> list[str]:
    return [g["comparisonKey"] for g in search(world, query)]


def v1_0(world: World) -> str:
    """The cohort's other group (stack v1.0): RUN_15149's."""
    return str(world.row(RUN_15149).comparison_key)


def variant(
    tag: str,
    *,
    workload_title: str | None = None,
    author: str | None = None,
    benchmark: str | None = None,
    license: str | None = None,
) -> dict[str, dict[str, Any]]:
    """RUN_15149's manifests as another run (``tag`` names it). A workload title makes a group
    of its own: the workload's cases change too (a title alone leaves its digest as it is)."""
    found = copy.deepcopy(MANIFESTS[RUN_15149])
    run = found["run"]
    run["metadata"]["name"] = f"search-{tag}"
    run["spec"]["sourceNative"]["externalId"] = f"search-{tag}"
    if benchmark is not None:
        run["spec"]["sourceNative"]["benchmark"] = benchmark
    if workload_title is not None:
        workload = found["workload"]
        workload["metadata"]["title"] = workload_title
        workload["spec"]["cases"][0]["externalId"] = hashlib.sha256(
            workload_title.encode()
        ).hexdigest()[:12]
        run["spec"]["workloadDigest"] = manifest_digest(workload)
    if author is not None:
        found["implementation"]["metadata"]["authors"] = [{"name": author}]
    if license is not None:  # another implementation: the run names it by its new digest
        found["implementation"]["spec"]["licensing"] = {"declared": license}
        run["spec"]["implementationDigest"] = manifest_digest(found["implementation"])
    return found


def ingest(world: World, manifest_set: dict[str, dict[str, Any]]) -> str:
    """Ingest a run; its comparison group."""
    envelope = ingestion_envelope(manifest_set, world.keys.ingester, now=world.clock.now)
    digest = world.append(envelope).subject_digest
    return str(world.row(digest).comparison_key)


# ------------------------------------------------------------------ values, not keys


def test_a_json_key_alone_matches_nothing(cohort: World) -> None:
    for word in JSON_KEYS:
        assert search(cohort, word) == [], word
    # Nor does a key with a word that matches: every word must match a value.
    assert search(cohort, "B200 spec") == []
    # Digests are references, not words: the workload's own is not searched.
    assert search(cohort, "48004025de89") == []


def test_values_of_every_kind_match(cohort: World) -> None:
    both = sorted([V1_1, v1_0(cohort)])
    for word in (
        "056_language",  # benchmark (definition name)
        "B200",  # GPU product
        "hidden_size",  # a workload axis name
        "14336",  # a workload axis value
        "sol-execbench",  # source
        "reported",  # evidence level
        "evaluation",  # the protocol's harness name ("SOL-ExecBench evaluation stack")
        "sol-submission",  # run name
    ):
        assert sorted(keys(cohort, word)) == both, word
    assert keys(cohort, "v1.1") == [V1_1]  # stack version
    assert keys(cohort, "doubleAI") == [v1_0(cohort)]  # author (RUN_15149's implementation)
    assert keys(cohort, "15149") == [v1_0(cohort)]  # external id


# ------------------------------------------------------------------ case and Unicode


def test_non_ascii_values_match_in_any_case(cohort: World) -> None:
    group = ingest(
        cohort, variant("unicode", workload_title="ÄBC Straße-Kernel", author="Élodie Ünal")
    )
    assert group not in (V1_1, v1_0(cohort))
    for word in (
        "äbc",
        "ÄBC",
        "äBc",
        "A\u0308BC",  # Ä spelled as A and a combining diaeresis
        "ÄＢＣ",  # fullwidth letters: the same word once NFKC-normalised
        "STRASSE",  # ß folds to ss
        "straße",
        "élodie",
        "ÉLODIE",
        "ünal",
        "ÜNAL",
    ):
        assert keys(cohort, word) == [group], word
    # Folding is not accent stripping: a plain "abc" is another word.
    assert keys(cohort, "abc") == []


# ------------------------------------------------------------------ LIKE's characters


def test_like_wildcards_in_a_word_are_plain_characters(cohort: World) -> None:
    both = sorted([V1_1, v1_0(cohort)])
    assert keys(cohort, "%") == []
    assert sorted(keys(cohort, "_")) == both  # underscores are in names: "056_language"
    assert sorted(keys(cohort, "num_heads")) == both
    for word in ("num%heads", "num%", "%heads", "num_h_ads", "hidden\\_size", "\\"):
        assert keys(cohort, word) == [], word


# ------------------------------------------------------------------ substrings and AND


def test_a_substring_matches_and_every_word_must(cohort: World) -> None:
    both = sorted([V1_1, v1_0(cohort)])
    assert sorted(keys(cohort, "B200")) == both  # in "NVIDIA B200"
    assert sorted(keys(cohort, "b20")) == both
    assert sorted(keys(cohort, "vidia")) == both
    assert keys(cohort, "B200 v1.0") == [v1_0(cohort)]
    assert keys(cohort, "b200 stack v1.1 decoder") == [V1_1]
    # Every word must match one run: no run has both stack versions.
    assert keys(cohort, "v1.0 v1.1") == []
    assert keys(cohort, "B200 no-such-kernel") == []
    only = search(cohort, "doubleAI B200")
    assert [(g["comparisonKey"], g["matchingRuns"], g["runs"]) for g in only] == [
        (v1_0(cohort), 1, 1)
    ]
    # A word may not span two values: the seed's title ends "B200", its source follows it.
    assert str(cohort.row(SEED).title).endswith("B200")
    assert keys(cohort, "B200sol-execbench") == []


# ------------------------------------------------------------------ ranking


def test_groups_whose_benchmark_carries_the_words_rank_first_then_the_biggest(
    cohort: World,
) -> None:
    lookalike = ingest(
        cohort,
        variant("look-1", workload_title="a 056_language lookalike", benchmark="other_kernel"),
    )
    assert (
        ingest(
            cohort,
            variant("look-2", workload_title="a 056_language lookalike", benchmark="other_kernel"),
        )
        == lookalike
    )
    # The cohort's groups have 056_language in their benchmark; the lookalike in a title only.
    expected = [V1_1, v1_0(cohort), lookalike]
    assert keys(cohort, "056_language") == expected
    # All carry B200 in their GPU: then the biggest first (3, 2 and 1 runs).
    assert keys(cohort, "B200") == [V1_1, lookalike, v1_0(cohort)]
    # The same query, the same order.
    assert keys(cohort, "056_language") == expected
    assert [g["matchingRuns"] for g in search(cohort, "B200")] == [3, 2, 1]


# ------------------------------------------------------------------ properties


def folded(text: str) -> str:
    """What "the same word, whatever its case" means here: NFKC and Unicode case folding."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def _case_stable(c: str) -> bool:
    # Letters whose upper and lower case fold alike: not the dotless ı, whose upper case "I"
    # folds to a dotted i (no case-insensitive match can make those equal).
    return folded(c.upper()) == folded(c) == folded(c.lower())


LETTERS = st.characters(categories=("Lu", "Ll", "Nd", "Pc", "Pd", "Po")).filter(_case_stable)
VALUE = st.text(st.one_of(LETTERS, st.just(" ")), min_size=1, max_size=12)
RUN_SLOTS = ("benchmark", "product", "name", "title", "source", "author", "evidence_level")
MANIFEST_SLOTS = (
    "protocol_name",
    "protocol_title",
    "harness",
    "stack_version",
    "workload_name",
    "workload_title",
    "axis",
    "tensor",
    "dtype",
    "comparator",
)
SLOTS = (*RUN_SLOTS, "external_id", *MANIFEST_SLOTS)
Group = dict[str, str]
GROUP = st.fixed_dictionaries(
    {slot: VALUE for slot in SLOTS}
    | {"axis_value": st.integers(0, 10**6).map(str), "shape": st.integers(1, 4096).map(str)}
)


def _protocol(g: Group) -> dict[str, Any]:
    return {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "BenchmarkProtocol",
        "metadata": {"name": g["protocol_name"], "title": g["protocol_title"]},
        "spec": {"harness": {"name": g["harness"], "version": g["stack_version"]}},
    }


def _workload(g: Group) -> dict[str, Any]:
    return {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "WorkloadCase",
        "metadata": {"name": g["workload_name"], "title": g["workload_title"]},
        "spec": {
            "operationSpecDigest": "sha256:" + "ab" * 32,
            "axes": {g["axis"]: int(g["axis_value"])},
            "tensors": {g["tensor"]: {"dtype": g["dtype"], "shape": [int(g["shape"])]}},
            "correctness": {"comparator": g["comparator"]},
        },
    }


# Every key the documents above use: words that must find nothing unless a value has them.
DOCUMENT_KEYS = (
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "title",
    "spec",
    "harness",
    "version",
    "operationSpecDigest",
    "axes",
    "tensors",
    "dtype",
    "shape",
    "correctness",
    "comparator",
    "BenchmarkProtocol",
    "WorkloadCase",
    "kernelindex.dev/v1alpha1",
    "sha256",
)


def _insert(session: Session, number: int, g: Group) -> str:
    """One run of a group of its own, straight into the views (no signing: thousands of
    examples), with its protocol and workload; the group's key."""
    key = f"sha256:{number:064x}"
    digests = {}
    for role, document in (("protocol", _protocol(g)), ("workload", _workload(g))):
        # The runner writes ASCII JSON; UTF-8 JSON takes the other way through rough_text.
        text = json.dumps(
            document, sort_keys=True, separators=(",", ":"), ensure_ascii=number % 2 == 0
        )
        # Two groups may draw the same document: the digest is the group's, not the text's.
        digests[role] = "sha256:" + hashlib.sha256(f"{role} {number}".encode()).hexdigest()
        session.execute(
            insert(manifests).values(
                digest=digests[role],
                role=role,
                kind=document["kind"],
                name=document["metadata"]["name"],
                document=text,
                position=number,
            )
        )
    session.execute(
        insert(runs).values(
            run_digest=f"sha256:{number + 100:064x}",
            **{slot: g[slot] for slot in (*RUN_SLOTS, "external_id")},
            status="passed",
            comparison_key=key,
            metric="latency",
            protocol_digest=digests["protocol"],
            workload_digest=digests["workload"],
            ingested_position=number,
            ingested_at="2026-01-01T00:00:00Z",
            retracted=False,
            attestations=0,
            reruns=0,
            evidence_order=1,
            evidence_reasons="[]",
            evidence_caused_by=number,
            policy_version="p",
            last_position=number,
        )
    )
    return key


def _values(g: Group) -> list[str]:
    return list(g.values())


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    e = create_engine(db_url)
    yield e
    e.dispose()


def _found(engine: Engine, groups: list[Group], word: str) -> tuple[list[str], list[str]]:
    """(the groups' keys, those a search for ``word`` finds), in a transaction rolled back."""
    with Session(engine) as session:
        made = [_insert(session, n + 1, g) for n, g in enumerate(groups)]
        found = [
            g.key for g in find(build_index(rows_of(session)), word, Filters(), "relevance").groups
        ]
        session.rollback()
    return made, found


CASES: tuple[Callable[[str], str], ...] = (str.upper, str.lower, str)
# Each example runs in a transaction that is rolled back: sharing the database is safe.
PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(groups=st.lists(GROUP, min_size=1, max_size=3), data=st.data())
def test_a_word_from_any_value_in_any_case_finds_its_group(
    engine: Engine, groups: list[Group], data: st.DataObject
) -> None:
    which = data.draw(st.integers(0, len(groups) - 1))
    value = data.draw(st.sampled_from(_values(groups[which])))
    # A piece of one word of the value (a query word has no spaces), its case changed.
    piece = data.draw(st.sampled_from([w for w in value.split(" ") if w] or [""]))
    assume(piece)
    start = data.draw(st.integers(0, len(piece) - 1))
    end = data.draw(st.integers(start + 1, len(piece)))
    changes = data.draw(
        st.lists(st.sampled_from(CASES), min_size=end - start, max_size=end - start)
    )
    word = "".join(change(c) for change, c in zip(changes, piece[start:end], strict=True))
    made, found = _found(engine, groups, word)
    assert made[which] in found
    # And exactly the groups with a value that has it (the others may have it by chance).
    assert set(found) == {
        k
        for k, g in zip(made, groups, strict=True)
        if any(folded(word) in folded(v) for v in _values(g))
    }


@PROPERTY
@given(
    groups=st.lists(GROUP, min_size=1, max_size=3),
    word=st.one_of(
        st.sampled_from(DOCUMENT_KEYS),
        st.sampled_from(DOCUMENT_KEYS).map(str.upper),
        st.text(LETTERS, min_size=1, max_size=6),
    ),
)
def test_a_word_in_no_value_finds_nothing(engine: Engine, groups: list[Group], word: str) -> None:
    assume(not any(folded(word) in folded(v) for g in groups for v in _values(g)))
    _, found = _found(engine, groups, word)
    assert found == []


# Text rich in what JSON escapes or Unicode folds: slashes, quotes, accents, astral letters.
TRICKY = st.text(st.sampled_from('ab/\\"\n\x01éÄß\u0308ﬁ𝐀🍪'), max_size=8) | st.text(max_size=8)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TRICKY,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text() | st.sampled_from(["axes", "tensors", "labels", "kind", "specDigest"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(document=JSON, ensure_ascii=st.booleans(), escaped_slashes=st.booleans())
def test_the_rough_text_of_a_manifest_has_every_value_it_has(
    document: Any, ensure_ascii: bool, escaped_slashes: bool
) -> None:
    """The quick test that skips parsing a manifest never skips one with a word in a value."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=ensure_ascii)
    if escaped_slashes:  # valid JSON too, though json.dumps never writes it
        text = text.replace("/", "\\/")
    rough = rough_text(text)
    if rough is not None:
        for value in manifest_values(json.loads(text)):
            assert fold(value) in rough, value


# ------------------------------------------------------------------ pages, sorts, facets


def page_of(world: World, query: str = "", **asked: Any) -> SearchPage:
    filters = SearchFilters(
        gpu=asked.pop("gpu", None),
        source=asked.pop("source", None),
        dtype=asked.pop("dtype", None),
        level=asked.pop("level", None),
        license=asked.pop("license", None),
        installable=asked.pop("installable", None),
    )
    return Search(Views(world.ledger)).groups(query, filters, **asked)


@pytest.fixture
def five_groups(cohort: World) -> tuple[World, list[str]]:
    """The cohort's two groups and three more (one of two runs), ingested in this order."""
    made = [
        ingest(cohort, variant(f"more-{n}", workload_title=f"extra case {n}")) for n in range(3)
    ]
    assert ingest(cohort, variant("more-0b", workload_title="extra case 0")) == made[0]
    return cohort, made


def test_every_group_is_on_exactly_one_page_and_the_total_is_exact(
    five_groups: tuple[World, list[str]],
) -> None:
    world, made = five_groups
    every = {V1_1, v1_0(world), *made}
    for sort in SORTS:
        first = page_of(world, "B200", sort=sort, per_page=2)
        assert (first.total, first.pages, first.next) == (5, 3, 2)
        walked = [g.comparison_key for g in first.items]
        page = first
        while page.next is not None:
            page = page_of(world, "B200", sort=sort, per_page=2, page=page.next)
            walked += [g.comparison_key for g in page.items]
        assert sorted(walked) == sorted(every) and len(walked) == 5, sort
        # The same query, the same order: pages never overlap or skip.
        assert [g.comparison_key for g in page_of(world, "B200", sort=sort, per_page=5).items] == (
            walked
        )
    newest = page_of(world, "B200", sort="newest").items
    assert [g.comparison_key for g in newest][:3] == [made[0], made[2], made[1]]
    by_runs = page_of(world, "B200", sort="runs").items
    assert [(g.matching_runs) for g in by_runs] == [3, 2, 1, 1, 1]
    assert by_runs[1].comparison_key == made[0]


def test_facets_count_the_groups_each_filter_leaves(
    five_groups: tuple[World, list[str]],
) -> None:
    world, _ = five_groups
    found = page_of(world, "extra")
    assert found.total == 3
    facets = {f.name: {v.value: v.count for v in f.values} for f in found.facets}
    assert facets["gpu"] == {"NVIDIA B200": 3}
    assert facets["source"] == {"sol-execbench": 3}
    assert facets["level"] == {"reported": 3}
    assert facets["license"] == {"not stated": 3}
    assert facets["installable"] == {"no": 3}
    for name, values in facets.items():
        for value, count in values.items():
            narrowed = page_of(world, "extra", **{name: value})
            assert narrowed.total == count, (name, value)
            chosen = next(f for f in narrowed.facets if f.name == name).values
            assert [v.value for v in chosen if v.selected] == [value]
    # A GPU as people type it; a value nothing has leaves nothing (and is no error).
    assert page_of(world, "extra", gpu="b200").total == 3
    assert page_of(world, "extra", gpu="nvidia  B200").total == 3
    assert page_of(world, "extra", gpu="h100").total == 0
    assert page_of(world, "extra", level="VERIFIED").total == 0
    # No words: every group, narrowed by filters alone.
    assert page_of(world).total == 5
    assert page_of(world, source="sol-execbench", gpu="B200").total == 5


def test_a_write_is_found_by_the_next_search(five_groups: tuple[World, list[str]]) -> None:
    world, _ = five_groups
    views = Views(world.ledger)
    search = Search(views)
    assert search.groups("zebra").total == 0
    late = ingest(world, variant("late", workload_title="zebra arrival"))
    found = search.groups("zebra")  # the same service: its index follows the views
    assert [g.comparison_key for g in found.items] == [late] and found.total == 1


def test_bad_parameters_are_refused_and_write_nothing(cohort: World) -> None:
    events = cohort.count()
    for asked, says in (
        ({"sort": "fastest"}, "unknown sort"),
        ({"level": "gold"}, "unknown evidence level"),
        ({"per_page": 0}, "perPage"),
        ({"per_page": MAX_PER_PAGE + 1}, "perPage"),
        ({"page": 0}, "page must be"),
        ({"page": 2}, "past the last"),
    ):
        with pytest.raises(BadQueryError, match=says):
            page_of(cohort, "B200", **asked)
    with pytest.raises(BadQueryError, match="at most 8 words"):
        page_of(cohort, "a b c d e f g h i")
    assert cohort.count() == events


def test_suggestions_name_gpus_operations_groups_and_implementations(cohort: World) -> None:
    search = Search(Views(cohort.ledger))
    found = search.suggest("b20").suggestions
    assert found[0].kind == "gpu" and found[0].text == "NVIDIA B200"
    assert found[0].href == "/search?gpu=NVIDIA%20B200"
    operation = search.suggest("056_lang").suggestions
    assert [s.kind for s in operation][:1] == ["operation"]
    assert operation[0].href.startswith("/operations/056_language")
    named = search.suggest("sol-sub").suggestions
    assert {s.kind for s in named} >= {"implementation"}
    assert all(s.href.startswith("/runs/sha256:") for s in named if s.kind == "implementation")
    assert search.suggest("b").suggestions == []  # one letter suggests nothing
    assert search.suggest("zzzz").suggestions == []


@PROPERTY
@given(
    word=st.sampled_from(["", "B200", "extra", "reported", "v1.1", "case 1", "nothing"]),
    name=st.sampled_from(["gpu", "source", "dtype", "level", "license", "installable"]),
    per_page=st.integers(1, 4),
)
def test_pages_and_facets_agree_whatever_is_asked(
    five_groups: tuple[World, list[str]], word: str, name: str, per_page: int
) -> None:
    world, _ = five_groups
    first = page_of(world, word, per_page=per_page)
    keys: list[str] = []
    for page in range(1, first.pages + 1):
        keys += [g.comparison_key for g in page_of(world, word, per_page=per_page, page=page).items]
    assert len(keys) == len(set(keys)) == first.total
    for value in next(f for f in first.facets if f.name == name).values:
        narrowed = page_of(world, word, per_page=per_page, **{name: value.value})
        assert narrowed.total == value.count <= first.total


def test_an_implementations_terms_narrow_to_its_own_runs(cohort: World) -> None:
    """A run whose implementation states a license shares its group with runs whose
    implementation states none: each filter leaves the group with only its own runs."""
    group = ingest(cohort, variant("licensed", license="MIT"))
    assert group == v1_0(cohort)
    every = page_of(cohort)
    facets = {f.name: {v.value: v.count for v in f.values} for f in every.facets}
    assert facets["license"] == {"not stated": 2, "MIT": 1}
    assert facets["installable"] == {"no": 2}
    licensed = page_of(cohort, license="mit")  # as people type it
    assert [(g.comparison_key, g.matching_runs) for g in licensed.items] == [(group, 1)]
    unstated = {
        g.comparison_key: g.matching_runs for g in page_of(cohort, license="not stated").items
    }
    assert unstated[group] == 1 and len(unstated) == 2
    assert page_of(cohort, installable="YES").total == 0
    with pytest.raises(BadQueryError, match="installable is yes or no"):
        page_of(cohort, installable="maybe")


def levels(search: Search) -> dict[str, int]:
    found = search.groups("B200")
    return {v.value: v.count for f in found.facets if f.name == "level" for v in f.values}


def test_a_write_no_search_reads_keeps_the_index_and_one_it_reads_rebuilds_it(
    five_groups: tuple[World, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attestations move the views but no value a search reads: the index is kept (a busy
    ledger's searches do not rebuild it at every write); a new run or a changed evidence
    level rebuilds it, and the answers follow."""
    world, _ = five_groups
    builds: list[int] = []
    real_build = api.service.search.build_index

    def counted(session: Any) -> Any:
        builds.append(1)
        return real_build(session)

    monkeypatch.setattr(api.service.search, "build_index", counted)
    search = Search(Views(world.ledger))
    assert search.groups("B200").total == 5 and len(builds) == 1
    for n in range(3):
        world.append(world.attest_envelope(SEED, f"a note {n}"))
        assert search.groups("B200").total == 5
    assert len(builds) == 1
    late = ingest(world, variant("late-2", workload_title="quagga arrival"))
    assert [g.comparison_key for g in search.groups("quagga").items] == [late]
    assert len(builds) == 2
    before = levels(search)
    world.append(world.result_envelope(world.request_rerun(SEED)))
    after = levels(search)
    assert len(builds) == 3 and after != before, (before, after)
