"""Attacks on the manifest models as msgspec Structs (issues 36 and 33): what a refused
manifest's error says and where, inputs that made msgspec raise something other than its
ValidationError, and numbers and strings at the edges JSON Schema draws."""

from __future__ import annotations

import copy
import json
import math
import threading
from typing import Any

import pytest

from domain.errors import ManifestError
from domain.manifests.models.common import MAX_SAFE_INTEGER
from domain.manifests.registry import validate_manifest
from tests.paths import CONFORMANCE

SEED = json.loads((CONFORMANCE / "fixtures" / "seed" / "run-38823.manifest.json").read_text())


def run(**changes: Any) -> dict[str, Any]:
    """The seed run with ``changes`` (``"spec.timing.samples": 3``) applied."""
    doc = copy.deepcopy(SEED["run"])
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target = doc
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return doc


def refusal(doc: object) -> str:
    with pytest.raises(ManifestError) as refused:
        validate_manifest(doc)
    assert refused.value.code == "schema-violation"
    return refused.value.message


# --- a lone surrogate made msgspec raise UnicodeEncodeError, not a ManifestError ----------------


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"metadata": "a\ud800"}, "metadata"),  # where an object is expected: convert crashed
        ({"metadata.title": "\udfff"}, "metadata.title"),
        ({"metadata.labels": {"a\ud800": "x"}}, "metadata.labels.a\ud800"),
        ({"spec.status": "passed\ud800"}, "spec.status"),
        ({"spec.timing.latencyNs.confidence95": [1, 2, ["\ud800"]]}, "confidence95.2.0"),
    ],
)
def test_a_lone_surrogate_is_refused_in_plain_words(changes: dict[str, Any], where: str) -> None:
    message = refusal(run(**changes))
    assert message.startswith("BenchmarkRun: ") and message.endswith(
        f"{where}: must not hold a lone surrogate"
    )


def test_items_nested_deeper_than_the_stack_where_the_schema_allows_anything() -> None:
    # confidence95's items after the second are unconstrained; a document built in Python
    # may nest them 100,000 levels deep, which no JSON reader here reads (64 levels) and the
    # JSON encoder gives up on: refused as such, and a surrogate at the bottom still named.
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert refusal(run(**{"spec.timing.latencyNs.confidence95": [1, 2, deep]})) == (
        "BenchmarkRun: (root): nests too deeply to be written as JSON text"
    )
    innermost = deep
    while innermost:
        innermost = innermost[0]
    innermost.append("\ud800")  # 100,000 levels down
    assert refusal(run(**{"spec.timing.latencyNs.confidence95": [1, 2, deep]})).endswith(
        "confidence95.2" + ".0" * 100_001 + ": must not hold a lone surrogate"
    )


# --- where the error is ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["z` - at `$.spec.status", "q - at `key` in `$.metadata.labels", "a - at `", "[...]"]
)
def test_an_unknown_field_is_named_where_it_is(name: str) -> None:
    top = run()
    top[name] = 1
    assert refusal(top) == f"BenchmarkRun: {name}: unknown field"
    nested = run()
    nested["spec"]["timing"][name] = 1
    assert refusal(nested) == f"BenchmarkRun: spec.timing.{name}: unknown field"


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ((), "5: keys must be strings"),
        (("spec", "timing"), "spec.timing.5: keys must be strings"),
        (("metadata", "labels"), "metadata.labels.5: keys must be strings"),
    ],
)
def test_a_key_that_is_no_string(where: tuple[str, ...], message: str) -> None:
    # (No JSON text makes one; a document built in Python can. describe() crashed on it.)
    doc = run()
    target = doc
    for part in where:
        target = target[part]
    target[5] = 1
    assert refusal(doc) == f"BenchmarkRun: {message}"


def test_an_error_that_cannot_be_placed_is_still_a_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from domain.manifests.models import schema_errors

    def lost(*_: object) -> str:
        raise LookupError("the path and the document disagree")

    monkeypatch.setattr(schema_errors, "describe", lost)
    assert refusal(run(**{"spec.status": "nope"})) == (
        "BenchmarkRun: Invalid enum value 'nope' - at `$.spec.status`"
    )


def test_a_map_value_is_named_by_its_key_not_the_first_key() -> None:
    # msgspec writes a map's value as ``[...]``: the key is found again in the document.
    metrics = {"fine": 1, "also_fine": 2.5, "broken": "x", "later": True}
    assert refusal(run(**{"spec.sourceNative.metrics": metrics})) == (
        "BenchmarkRun: spec.sourceNative.metrics.broken: must be a number"
    )


def test_a_map_key_is_named_even_when_it_spells_a_path() -> None:
    env = {
        "kind": "ExecutionEnvironment",
        "apiVersion": "kernelindex.dev/v1alpha1",
        "metadata": {"name": "e"},
        "spec": {
            "hardware": {"vendor": "nvidia", "product": "B200", "architecture": "blackwell"},
            "software": {},
            "settings": {"environmentVariables": {"OK": "1", "a.b[...]": "x" * 501}},
        },
    }
    assert refusal(env) == (
        "ExecutionEnvironment: spec.settings.environmentVariables.a.b[...]: "
        "must be at most 500 characters"
    )
    env["spec"]["settings"]["environmentVariables"] = {"N" * 201: "x"}
    assert refusal(env) == (
        f"ExecutionEnvironment: spec.settings.environmentVariables.{'N' * 201}: "
        "invalid property name: must be at most 200 characters"
    )


def test_an_item_in_a_list_is_named_by_its_index() -> None:
    authors = [{"name": "a"}, {"github": "b"}, {"name": 5}]
    assert refusal(run(**{"metadata.authors": authors})) == (
        "BenchmarkRun: metadata.authors.2.name: must be a string"
    )


# --- numbers at JSON Schema's edges ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (MAX_SAFE_INTEGER, None),
        (float(MAX_SAFE_INTEGER), None),  # an integral float is an integer
        (MAX_SAFE_INTEGER + 1, "must be at most 9007199254740991"),
        (float(2**53), "must be at most 9007199254740991"),
        (2**64, "must be at most 9007199254740991"),
        (10**400, "must be at most 9007199254740991"),
        (1e300, "must be at most 9007199254740991"),
        (2.5, "must be an integer"),
        (math.inf, "must be a finite number"),  # (no JSON text spells it)
        (math.nan, "must be a finite number"),
        (-0.0, "must be greater than 0"),
        (True, "must be an integer"),
        ("3", "must be an integer"),
        (None, "must be an integer"),
    ],
)
def test_an_integer_field(value: object, message: str | None) -> None:
    doc = run(**{"spec.timing.samples": value})
    if message is None:
        validate_manifest(doc)
    else:
        assert refusal(doc) == f"BenchmarkRun: spec.timing.samples: {message}"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (10**400, None),  # a number has no bound here: any int, as JSON Schema and pydantic
        (-1.5e308, None),
        (math.inf, "must be a finite number"),
        (-math.inf, "must be a finite number"),
        (math.nan, "must be a finite number"),
        (False, "must be a number"),
        ("1", "must be a number"),
    ],
)
def test_a_number_field(value: object, message: str | None) -> None:
    doc = run(**{"spec.sourceNative.metrics": {"x": value}})
    if message is None:
        validate_manifest(doc)
    else:
        assert refusal(doc) == f"BenchmarkRun: spec.sourceNative.metrics.x: {message}"


# --- strings: ECMA-262 patterns, lengths in code points --------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"metadata.name": "run\n"}, "metadata.name: must match pattern ^[a-z0-9][a-z0-9._-]*$"),
        ({"spec.observedAt": "2026-08-22T11:05:31Z\n"}, "spec.observedAt: must be a UTC"),
        ({"spec.observedAt": "2026-08-22T11:05:3\u0661Z"}, "spec.observedAt: must be a UTC"),
        ({"spec.timing.latencyNs.mean": "\u0663 ms"}, "spec.timing.latencyNs.mean: must be whole"),
        ({"spec.timing.latencyNs.mean": "3 ms\n"}, "spec.timing.latencyNs.mean: must be whole"),
        ({"metadata.title": "\U0001f600" * 201}, "metadata.title: must be at most 200 characters"),
    ],
)
def test_patterns_and_lengths(changes: dict[str, Any], message: str) -> None:
    assert refusal(run(**changes)).startswith(f"BenchmarkRun: {message}")


def test_lengths_count_code_points_not_utf16_units() -> None:
    validate_manifest(run(**{"metadata.title": "\U0001f600" * 200}))  # 400 UTF-16 units


def test_ecma_whitespace_between_a_duration_and_its_unit() -> None:
    for space in ("\ufeff", "\u3000", "\u2028"):
        validate_manifest(run(**{"spec.timing.latencyNs.mean": f"3{space}ms"}))
    for not_space in ("\x1c", "\u0085", "\u180e"):  # Python's \s has them; ECMA's does not
        assert "must be whole" in refusal(run(**{"spec.timing.latencyNs.mean": f"3{not_space}ms"}))


# --- the gate only checks ---------------------------------------------------------------------


def test_the_document_is_not_changed_and_nothing_is_invented() -> None:
    doc = run(**{"spec.timing.samples": 4.0, "spec.timing.latencyNs.p95": "0.008 ms"})
    before = copy.deepcopy(doc)
    validate_manifest(doc)
    assert doc == before and isinstance(doc["spec"]["timing"]["samples"], float)


def test_validation_from_many_threads_agrees() -> None:
    # Nothing to build before a first use (pydantic's deferred validators were built once,
    # at the server's start, so that two threads never built one at once).
    docs = [run(), run(**{"spec.status": "nope"}), run(**{"spec.timing.samples": 3.0})] * 40
    verdicts: list[tuple[int, bool]] = []
    lock = threading.Lock()

    def check(index: int, doc: dict[str, Any]) -> None:
        try:
            validate_manifest(doc)
            ok = True
        except ManifestError:
            ok = False
        with lock:
            verdicts.append((index, ok))

    threads = [threading.Thread(target=check, args=(i, d)) for i, d in enumerate(docs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(verdicts) == [(i, i % 3 != 1) for i in range(len(docs))]
