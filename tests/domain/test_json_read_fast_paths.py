"""The ``json_read`` roads of admission's stateless checks give what the general roads give.

Admission reads an ingestion's manifests from the signed statement's text with the strict
JSON reader, so they are JSON values: exact types, safe integers, no NUL or lone surrogate.
``canonical_json(..., json_read=True)`` then takes the C encoder's text where it is ASCII and
spells no float otherwise than ES6, and ``validate_manifest(..., json_read=True)`` skips the
``_as_json`` round trip. Each must equal the reference for every value the strict reader can
give (rfc8785; the general road), and fall back to it for anything else.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import msgspec
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

import domain.canonical as canonical
from domain.canonical import (
    _EXPONENT_ENDING,
    _POINT_ZERO_ENDING,
    canonical_json,
    digest_of,
)
from domain.documents import parse_json
from domain.errors import DomainError
from domain.manifests.canonical_form import _DIGESTS, manifest_digest
from domain.manifests.manifest_set import check_manifest_set
from domain.manifests.registry import _as_json, validate_manifest

SAFE = 2**53 - 1
# Strings that look like the spellings the fast path looks for, or hold what JSON escapes.
lookalike = st.sampled_from(["1e5,", ".0]", "x.0}", "e-7}", "1.0", "\\", '"', "\n", "\x7f", "é"])
text = st.text(max_size=8) | lookalike
numbers = (
    st.integers(-SAFE, SAFE)
    | st.integers(-(2**70), 2**70)  # the reader turns long ones into floats, or refuses them
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1.0, -0.0, 1e16, 1e21, 1e-7, 1e-5, 5e-324, 0.5, 1.1676])
)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=25,
)


def _read(value: Any) -> Any:
    """``value`` as the strict reader reads its JSON text (compact, as a signer writes)."""
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    try:
        return parse_json(data)
    except (DomainError, ValueError):
        return None  # a text the reader refuses: nothing for the checks to meet


def _typed(value: Any) -> Any:
    """``value`` with each scalar's exact type beside it (``1 == 1.0 == True`` in Python)."""
    if type(value) is dict:
        return ("dict", [(k, _typed(v)) for k, v in value.items()])
    if type(value) is list:
        return ("list", [_typed(v) for v in value])
    return (type(value).__name__, value)


@settings(max_examples=400)
@given(st.dictionaries(text, json_values, max_size=5))
def test_a_read_object_is_written_as_rfc8785_writes_it(value: dict[str, Any]) -> None:
    read = _read(value)
    if type(read) is not dict:
        return
    assert canonical_json(read, json_read=True) == rfc8785.dumps(read)
    assert canonical_json(read, json_read=True) == canonical_json(read)
    assert digest_of(read, json_read=True) == digest_of(read)


@settings(max_examples=1500)
@given(
    st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(1e-8, 1e-3)
    | st.floats(1e15, 1e23)
    | st.integers(-(10**17), 10**17).map(float)
)
def test_a_float_the_encoder_spells_otherwise_than_es6_is_always_seen(number: float) -> None:
    """Where the C encoder's text of a float is not JCS's, the two searches find it, in
    every place a float can stand in an object."""
    for value in ({"n": number}, {"l": [number, 1]}, {"l": [1, number]}, {"o": {"n": number}}):
        written = msgspec.json.encode(value, order="sorted")
        seen = (
            _EXPONENT_ENDING.search(written) is not None
            or _POINT_ZERO_ENDING.search(written) is not None
        )
        assert seen or written == rfc8785.dumps(value)


@pytest.mark.parametrize(
    ("value", "fast"),
    [
        ({"a": 1.1676, "d": "sha256:" + "3e" * 32, "s": "x"}, True),
        ({"a": [0.5, 2, None, True], "b": {"c": "tab\t"}}, True),
        ({"a": 1.0}, False),  # whole: "1.0" against JCS's "1"
        ({"a": 1e16}, False),  # "1e16" against "10000000000000000"
        ({"a": 1e-7}, False),
        ({"é": 1}, False),  # non-ASCII: UTF-16 order is rfc8785's to judge
        ({"a": "é"}, False),
        ({"a": "1e5,"}, False),  # a string that looks like an exponent: the general road
    ],
)
def test_the_fast_road_is_taken_only_where_it_is_sure(
    value: dict[str, Any], fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked: list[Any] = []
    shape = canonical._shape

    def walk(v: Any) -> int:
        walked.append(v)
        return shape(v)

    monkeypatch.setattr(canonical, "_shape", walk)
    assert canonical_json(value, json_read=True) == rfc8785.dumps(value)
    assert (not walked) is fast


@settings(max_examples=400)
@given(json_values)
def test_as_json_gives_back_what_the_reader_gave(value: Any) -> None:
    """``validate_manifest``'s ``json_read`` skips ``_as_json``, which reads a value back
    from its JSON text: for what the strict reader gives, the very same value and types."""
    read = _read(value)
    if read is None and value is not None:
        return
    assert _typed(_as_json("BenchmarkRun", read)) == _typed(read)


def _run_manifests() -> dict[str, Any]:
    from benchmarks.generate import load_seed, synthetic_manifests

    manifests: dict[str, Any] = synthetic_manifests(load_seed(), 7)
    return manifests


def _mutations(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run manifest changed in the ways a signer could: each read from JSON text."""
    changes: list[tuple[tuple[str, ...], Any]] = [
        (("spec", "status"), "nonsense"),
        (("spec", "status"), 3),
        (("spec", "timing", "latencyNs", "mean"), 1550693.0),
        (("spec", "timing", "latencyNs", "mean"), "0.5 ms"),
        (("spec", "timing", "latencyNs", "mean"), "0.5 parsecs"),
        (("spec", "timing", "latencyNs", "mean"), 1e20),
        (("spec", "timing", "latencyNs", "p95"), True),
        (("spec", "sourceNative", "metrics", "latency_ms"), 1e-7),
        (("spec", "sourceNative", "metrics", "ratio"), 2.0),
        (("spec", "sourceNative", "metrics", "Bad-Key"), 1),
        (("spec", "sourceNative", "benchmark"), "naïve · 2"),
        (("spec", "observedAt"), "yesterday"),
        (("spec", "extra"), {}),
        (("metadata", "title"), "x" * 300),
        (("apiVersion",), "v2"),
    ]
    found = []
    for path, new in changes:
        changed = copy.deepcopy(run)
        place = changed
        for step in path[:-1]:
            place = place.setdefault(step, {})
        place[path[-1]] = new
        found.append(changed)
    return found


def _outcome(step: Any) -> Any:
    try:
        return ("ok", step())
    except DomainError as exc:
        return (type(exc).__name__, exc.message)


def test_a_read_manifest_is_judged_alike_both_ways() -> None:
    """Every mutation of a run, read from JSON text: the same digest or the same refusal
    (class and message) with ``json_read`` as without it, memo cold each time."""
    manifests = _run_manifests()
    for run in [manifests["run"], *_mutations(manifests["run"])]:
        read = _read({**manifests, "run": run})
        assert read is not None
        _DIGESTS.clear()
        general = _outcome(lambda: check_manifest_set(read).digests)  # noqa: B023
        _DIGESTS.clear()
        fast = _outcome(lambda: check_manifest_set(read, json_read=True).digests)  # noqa: B023
        assert fast == general
        general = _outcome(lambda: check_manifest_set(read, admitted=True).digests)  # noqa: B023
        fast = _outcome(
            lambda: check_manifest_set(read, admitted=True, json_read=True).digests  # noqa: B023
        )
        assert fast == general
        one = read["run"]
        assert _outcome(lambda: validate_manifest(one, json_read=True)) == _outcome(  # noqa: B023
            lambda: validate_manifest(one)  # noqa: B023
        )


def test_the_memo_answers_both_roads_alike() -> None:
    """A read document is kept under its text's order (a signed statement's is sorted: the
    same key as the general road's); either road's entry gives the other the same digest."""
    read = parse_json(canonical_json(_run_manifests()))  # as a signer writes it: JCS
    _DIGESTS.clear()
    checked = check_manifest_set(read, json_read=True)
    kept = dict(_DIGESTS)
    assert set(kept.values()) == set(checked.digests.values())
    assert {manifest_digest(d) for d in read.values()} == set(checked.digests.values())
    assert dict(_DIGESTS) == kept  # the general road's keys: the same entries, all hits
    _DIGESTS.clear()
    assert {manifest_digest(d, json_read=True) for d in read.values()} == set(
        checked.digests.values()
    )


def test_whole_and_huge_floats_in_a_run_digest_as_the_reference_does() -> None:
    manifests = _run_manifests()
    run = manifests["run"]
    run["spec"]["sourceNative"]["metrics"] = {"a": 2.0, "b": 1e21, "c": 1e-7, "d": 0.25}
    read = _read(manifests)
    _DIGESTS.clear()
    fast = check_manifest_set(read, json_read=True).digests["run"]
    _DIGESTS.clear()
    assert fast == check_manifest_set(read).digests["run"]
    assert math.isclose(read["run"]["spec"]["sourceNative"]["metrics"]["b"], 1e21)
