"""domain.documents: strict JSON and YAML 1.2 parsing into JSON values (DESIGN.md §4 step 1)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from domain.canonical import canonical_json, digest_of
from domain.documents import (
    MAX_DEPTH,
    MAX_DOCUMENT_BYTES,
    MAX_NODES,
    detect_format,
    parse_admitted_json,
    parse_document,
    parse_json,
    parse_yaml,
)
from domain.errors import DomainError, ParseError, TooLargeError
from domain.manifests.canonical_form import manifest_digest

SEED_DIGESTS = {
    "run": "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47",
    "protocol": "sha256:6383f62490dad270ad2146a94f67b48fba5cfcbc0b9b180f02665c69cc4433a0",
    "environment": "sha256:f304afb2fedab4bbeadf8ac36a990ff517ab6e824dfe5a3ee0fe46259ff5e39f",
}


def y(text: str) -> Any:
    return parse_yaml(text.encode("utf-8"))


def test_error_hierarchy() -> None:
    assert issubclass(TooLargeError, ParseError)
    assert issubclass(ParseError, DomainError)
    assert issubclass(ParseError, ValueError)


# --- YAML 1.2 core schema: what is accepted, and as what ----------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # timestamps stay strings (YAML 1.2 has no timestamp type)
        ("a: 2020-01-01", "2020-01-01"),
        ("a: 2026-08-22T11:05:31.586Z", "2026-08-22T11:05:31.586Z"),
        ("a: 2001-12-14 21:59:43.10 -5", "2001-12-14 21:59:43.10 -5"),
        ("a: !!timestamp 2020-01-01", "2020-01-01"),
        # YAML 1.1 booleans are plain strings in 1.2
        ("a: yes", "yes"),
        ("a: no", "no"),
        ("a: on", "on"),
        ("a: off", "off"),
        ("a: y", "y"),
        ("a: n", "n"),
        ("a: Yes", "Yes"),
        # 1.1 integer spellings stay strings
        ("a: 1:20", "1:20"),
        # core schema integers
        ("a: 0o17", 15),
        ("a: 0x1F", 31),
        ("a: 0xff", 255),
        ("a: 017", 17),
        ("a: +12", 12),
        ("a: -12", -12),
        ("a: 0", 0),
        # core schema floats
        ("a: 1.5", 1.5),
        ("a: .5", 0.5),
        ("a: 1e3", 1000.0),
        ("a: -2.5E-3", -0.0025),
        ("a: 1.", 1.0),
        # null and booleans
        ("a: ~", None),
        ("a: null", None),
        ("a: Null", None),
        ("a: NULL", None),
        ("a:", None),
        ("a: true", True),
        ("a: True", True),
        ("a: TRUE", True),
        ("a: false", False),
        ("a: FALSE", False),
        # quoted and block scalars are strings whatever they look like
        ('a: "123"', "123"),
        ("a: '0x1F'", "0x1F"),
        ('a: "true"', "true"),
        ("a: 'null'", "null"),
        ("a: |\n  12\n", "12\n"),
        ("a: >-\n  .inf\n", ".inf"),
        # explicit core tags
        ("a: !!str 12", "12"),
        ("a: !<tag:yaml.org,2002:str> 12", "12"),
        ("a: !!map {x: 1}", {"x": 1}),
        ("a: !!seq [1]", [1]),
    ],
)
def test_yaml_core_schema_scalars(text: str, expected: Any) -> None:
    result = y(text)
    assert result == {"a": expected}
    assert type(result["a"]) is type(expected)


def test_yaml_structures() -> None:
    assert y("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}
    assert y("%YAML 1.2\n---\na: 1\n") == {"a": 1}
    assert y("---\na: 1\n...\n") == {"a": 1}
    assert y("- 1\n- two\n") == [1, "two"]
    assert y("just text") == "just text"
    assert y("a:\n  b:\n    - {c: d}\n") == {"a": {"b": [{"c": "d"}]}}
    assert y("# comment\na: 1 # trailing\n") == {"a": 1}


# --- rejections ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "word"),
    [
        ('{"a": 1, "a": 2}', "duplicate"),
        ('{"a": {"b": 1, "b": 1}}', "duplicate"),
        ('[{"x": 1}, {"y": 1, "y": 2}]', "duplicate"),
        ("[NaN]", "NaN"),
        ("[Infinity]", "Infinity"),
        ("[-Infinity]", "Infinity"),
        ('{"a": NaN}', "not a JSON number"),
        ("[1e400]", "out of range"),
        ("[-1e400]", "out of range"),
        ("[1,]", "malformed JSON"),
        ('{"a": 1} {"b": 2}', "malformed JSON"),
        ("{'a': 1}", "malformed JSON"),
        ("\ufeff{}", "malformed JSON"),
        ("", "malformed JSON"),
    ],
)
def test_json_rejections(data: str, word: str) -> None:
    with pytest.raises(ParseError, match=word):
        parse_json(data.encode("utf-8"))
    with pytest.raises(ParseError, match=word):
        parse_document(data.encode("utf-8"), fmt="json")


def test_json_error_says_where() -> None:
    with pytest.raises(ParseError, match=r"line 2 column 8"):
        parse_json(b'{"a": 1,\n  "b": }')


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("a: 1\na: 2\n", "duplicate"),
        ("a: 1\nb:\n  c: 1\n  c: 2\n", "duplicate"),
        ("{a: 1, a: 2}", "duplicate"),
        ("a: 1\n'a': 2\n", "duplicate"),
        ("a: .inf", "not a JSON number"),
        ("a: -.inf", "not a JSON number"),
        ("a: +.inf", "not a JSON number"),
        ("a: .Inf", "not a JSON number"),
        ("a: .INF", "not a JSON number"),
        ("a: .nan", "not a JSON number"),
        ("a: .NaN", "not a JSON number"),
        ("a: .NAN", "not a JSON number"),
        ("a: 1e400", "out of range"),
        ("a: !foo bar", "tag"),
        ("a: !foo {x: 1}", "tag"),
        ("a: !foo [1]", "tag"),
        ("a: !<tag:example.com,2000:x> 12", "tag"),
        ("a: !!binary SGVsbG8=", "tag"),
        ("a: !!set {x, y}", "tag"),
        ("a: !!omap [{x: 1}]", "tag"),
        ("a: !!pairs [{x: 1}]", "tag"),
        ("a: !!python/object/apply:os.system [ls]", "tag"),
        ("a: !!python/object:os.Foo {x: 1}", "tag"),
        ("%YAML 1.1\n---\na: 1\n", "1.2"),
        ("%YAML 1.3\n---\na: 1\n", "version"),
        ("%YAML 2.0\n---\na: 1\n", "version"),
        ("a: 1\n---\nb: 2\n", "one YAML document"),
        ("---\na: 1\n---\n", "one YAML document"),
        ("", "found 0"),
        ("# only a comment\n", "found 0"),
        ("base: &b {x: 1}\nd:\n  <<: *b\n", "merge"),
        ("1: a", "keys must be strings"),
        ("null: a", "keys must be strings"),
        ("true: a", "keys must be strings"),
        ("? [a]\n: 1\n", "keys must be strings"),
        ("a: [1, 2", "malformed YAML"),
        ("a: b: c", "malformed YAML"),
        ("a: *nowhere", "malformed YAML"),
        ("\ta: 1", "malformed YAML"),
    ],
)
def test_yaml_rejections(text: str, word: str) -> None:
    with pytest.raises(ParseError, match=word):
        parse_yaml(text.encode("utf-8"))
    with pytest.raises(ParseError, match=word):
        parse_document(text.encode("utf-8"), fmt="yaml")


def test_yaml_errors_name_the_line() -> None:
    with pytest.raises(ParseError, match="line 3"):
        y("a: 1\nb: 2\nc: !foo x\n")
    with pytest.raises(ParseError, match=r"line 3: duplicate key 'a'"):
        y("x: 0\nb:\n  a: 1\n  a: 2\n")


@pytest.mark.parametrize(
    "text",
    [
        'a: !foo "bar"',
        "a: !foo 'bar'",
        "a: !foo |\n  bar\n",
        'a: !!binary "SGVsbG8="',
        "a: !!binary |\n  R0lGODlhDAAMAIQAAP//9/X17unp5WZmZgAAAOfn515eXvPz7Y6OjuDg4J+fn5\n",
        "a: !!python/name:os.system ''",
    ],
)
def test_tags_on_quoted_or_block_scalars_are_rejected(text: str) -> None:
    try:
        result = y(text)
    except ParseError as exc:
        assert "tag" in str(exc)
    else:
        raise AssertionError(f"accepted as {result!r}")


def test_binary_tag_on_numeric_looking_scalar_is_rejected() -> None:
    try:
        result = y("a: !!binary 1234")
    except ParseError as exc:
        assert "tag" in str(exc)
    else:
        raise AssertionError(f"accepted as {result!r}")


@pytest.mark.parametrize("parse", [parse_json, parse_yaml, parse_document])
def test_invalid_utf8_is_rejected(parse: Any) -> None:
    with pytest.raises(ParseError, match="UTF-8"):
        parse(b'{"a": "\xff"}')
    with pytest.raises(ParseError, match="UTF-8"):
        parse(b"\xc3\x28")


# --- budgets: size, nesting, alias expansion -----------------------------------------------------


def _padded_json(size: int) -> bytes:
    head, tail = b'{"a": "', b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def _padded_yaml(size: int) -> bytes:
    head = b"a: "
    return head + b"x" * (size - len(head))


@pytest.mark.parametrize(
    ("parse", "make"),
    [
        (parse_json, _padded_json),
        (parse_yaml, _padded_yaml),
        (parse_document, _padded_json),
        (parse_document, _padded_yaml),
    ],
)
def test_one_mebibyte_is_the_size_limit(parse: Any, make: Any) -> None:
    assert MAX_DOCUMENT_BYTES == 1024 * 1024
    ok = make(MAX_DOCUMENT_BYTES)
    assert len(ok) == MAX_DOCUMENT_BYTES
    assert parse(ok) == {"a": "x" * ok.count(b"x")}
    with pytest.raises(TooLargeError, match="1 MiB"):
        parse(make(MAX_DOCUMENT_BYTES + 1))


def test_size_limit_counts_bytes_not_characters() -> None:
    # 2-byte characters: fewer characters than the limit, more bytes.
    text = '{"a": "' + "é" * (MAX_DOCUMENT_BYTES // 2) + '"}'
    with pytest.raises(TooLargeError, match="bytes"):
        parse_document(text.encode("utf-8"))


def _nested_lists(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _nested_block_maps(depth: int) -> bytes:
    # depth mappings; the innermost holds an empty flow mapping as its value.
    lines = [("  " * i) + "k:" for i in range(depth - 1)]
    lines.append(("  " * (depth - 1)) + "k: {}")
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("parse", [parse_json, parse_yaml, parse_document])
def test_nesting_limit_on_flow_collections(parse: Any) -> None:
    assert MAX_DEPTH == 64
    value = parse(_nested_lists(MAX_DEPTH))
    depth = 0
    while isinstance(value, list):
        depth += 1
        value = value[0] if value else None
    assert depth == MAX_DEPTH
    with pytest.raises(TooLargeError, match="nesting"):
        parse(_nested_lists(MAX_DEPTH + 1))


def test_scalar_leaves_count_as_a_level_in_both_parsers() -> None:
    # 63 lists around a scalar is depth 64; 64 lists around a scalar is 65.
    ok = b"[" * 63 + b"1" + b"]" * 63
    bad = b"[" * 64 + b"1" + b"]" * 64
    for parse in (parse_json, parse_yaml):
        parse(ok)
        with pytest.raises(TooLargeError, match="nesting"):
            parse(bad)


def test_nesting_limit_on_block_mappings() -> None:
    # k: {...} at depth d puts the scalar key at depth d + 1.
    parse_yaml(_nested_block_maps(MAX_DEPTH - 1))
    with pytest.raises(TooLargeError, match="nesting"):
        parse_yaml(_nested_block_maps(MAX_DEPTH + 1))


# Deep enough to exhaust the interpreter's recursion limit inside the library parser (the
# YAML composer recurses several frames per level; deeper YAML only costs time).
@pytest.mark.parametrize(("parse", "depth"), [(parse_json, 100_000), (parse_yaml, 600)])
def test_very_deep_documents_fail_cleanly(parse: Any, depth: int) -> None:
    with pytest.raises(TooLargeError, match=r"too deep"):
        parse(_nested_lists(depth))


def _laughs(levels: int, fanout: int = 10) -> bytes:
    items = ", ".join(['"lol"'] * fanout)
    lines = [f"l0: &l0 [{items}]"]
    for i in range(1, levels):
        refs = ", ".join([f"*l{i - 1}"] * fanout)
        lines.append(f"l{i}: &l{i} [{refs}]")
    return ("\n".join(lines) + "\n").encode()


def test_billion_laughs_is_refused() -> None:
    assert MAX_NODES == 200_000
    data = _laughs(9)  # 10**9 leaves if expanded
    assert len(data) < 1000
    with pytest.raises(TooLargeError, match="nodes"):
        parse_yaml(data)
    with pytest.raises(TooLargeError, match="alias"):
        parse_document(data, filename="lol.yaml")


def test_modest_alias_use_is_accepted() -> None:
    value = parse_yaml(_laughs(4))  # about 11,000 nodes
    assert len(value["l3"]) == 10
    assert value["l3"][0][0][0] == ["lol"] * 10
    with pytest.raises(TooLargeError):
        parse_yaml(_laughs(6))  # about 1.1 million nodes


# --- format detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "filename", "fmt"),
    [
        (b"{}", None, "json"),
        (b"  \n\t[1]", None, "json"),
        (b"a: 1", None, "yaml"),
        (b"- 1", None, "yaml"),
        (b"a: 1", "x.JSON", "json"),
        (b"{}", "x.yaml", "yaml"),
        (b"{}", "x.YML", "yaml"),
        (b"{}", "x.txt", "json"),
        (b"", None, "yaml"),
    ],
)
def test_detect_format(data: bytes, filename: str | None, fmt: str) -> None:
    assert detect_format(data, filename) == fmt


def test_parse_document_dispatch() -> None:
    assert parse_document(b'{"a": 1}') == {"a": 1}
    assert parse_document(b"a: 1") == {"a": 1}
    assert parse_document(b"a: 1", filename="m.yml") == {"a": 1}
    # .json forces the strict JSON parser even for YAML text...
    with pytest.raises(ParseError, match="malformed JSON"):
        parse_document(b"a: 1", filename="m.json")
    # ...and fmt wins over the filename.
    assert parse_document(b"a: 1", fmt="yaml", filename="m.json") == {"a": 1}
    # JSON-looking text read as YAML still obeys the YAML rules (no duplicates).
    with pytest.raises(ParseError, match="duplicate"):
        parse_document(b'{"a": 1, "a": 2}', fmt="yaml")


# --- JSON and YAML agree ------------------------------------------------------------------------

# YAML streams may not contain C0 controls (other than tab and line breaks) or DEL, even escaped
# JSON text may; stay within what both languages allow.
_printable = st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from(
    "éλ€中\U0001f600"
)
_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(_printable)
)
_json_values = st.recursive(
    _json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(_printable, max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json_values, st.sampled_from([None, 2]))
def test_json_text_reads_the_same_as_yaml(value: Any, indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False).encode("utf-8")
    from_json = parse_json(text)
    from_yaml = parse_yaml(text)
    assert from_json == from_yaml == value
    assert canonical_json(from_json) == canonical_json(from_yaml)


def _to_yaml(
    value: Any, *, flow: bool | None = False, version: tuple[int, int] | None = None
) -> bytes:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = flow
    yaml.allow_unicode = True
    if version is not None:
        yaml.version = version
    buffer = io.StringIO()
    yaml.dump(value, buffer)
    return buffer.getvalue().encode("utf-8")


@pytest.fixture(scope="module")
def seed(seed_path: Path) -> tuple[bytes, dict[str, Any]]:
    data = seed_path.read_bytes()
    return data, json.loads(data)


@pytest.mark.parametrize(
    "options",
    [{"flow": False}, {"flow": True}, {"flow": None}, {"flow": False, "version": (1, 2)}],
    ids=["block", "flow", "mixed", "directive"],
)
def test_seed_manifest_as_yaml_parses_to_the_same_value(
    seed: tuple[bytes, dict[str, Any]], options: dict[str, Any]
) -> None:
    data, expected = seed
    from_json = parse_document(data, filename="run-38823.manifest.json")
    assert from_json == expected
    yaml_text = _to_yaml(expected, **options)
    if "version" in options:
        assert yaml_text.startswith(b"%YAML 1.2")
    from_yaml = parse_document(yaml_text, filename="run-38823.manifest.yaml")
    assert from_yaml == from_json
    assert digest_of(from_yaml) == digest_of(from_json)
    # timestamps stayed strings
    assert from_yaml["run"]["spec"]["observedAt"] == "2026-08-22T11:05:31.586Z"
    for part, pinned in SEED_DIGESTS.items():
        assert manifest_digest(from_yaml[part]) == manifest_digest(from_json[part]) == pinned
        single = parse_yaml(_to_yaml(expected[part], **options))
        assert manifest_digest(single) == pinned


def test_hand_written_yaml_run_digests_like_the_json(seed: tuple[bytes, dict[str, Any]]) -> None:
    _, expected = seed
    run = expected["run"]
    text = f"""\
%YAML 1.2
---
apiVersion: kernelindex.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: sol-submission-38823   # metadata never contributes
spec:
  status: passed
  observedAt: 2026-08-22T11:05:31.586Z
  timing:
    primaryStatistic: mean
    latencyNs: {{mean: 1.750693 ms}}
  sourceNative:
    source: sol-execbench
    benchmark: {run["spec"]["sourceNative"]["benchmark"]}
    externalId: "38823"
    metrics:
      sol_score: 0.559752
      latency_ms: 1.750693
      avg_speedup: 1.1676
      fast_1_count: 13
      fast_1_total: 16
  protocolDigest: {run["spec"]["protocolDigest"]}
  workloadDigest: {run["spec"]["workloadDigest"]}
  environmentDigest: {run["spec"]["environmentDigest"]}
  implementationDigest: {run["spec"]["implementationDigest"]}
"""
    assert manifest_digest(parse_yaml(text.encode())) == SEED_DIGESTS["run"]


@pytest.mark.parametrize(
    "text", ["a: 1_000", "a: 0b101", "a: -0x1f", "a: !!int foo", "a: !!bool yes"]
)
def test_scalars_whose_type_readers_disagree_on_are_refused(text: str) -> None:
    # YAML 1.1 readers (and ruamel's resolver) type these differently from the 1.2 core
    # schema; a digest must not depend on which reader was used.
    with pytest.raises(ParseError, match="ambiguous scalar"):
        y(text)


@pytest.mark.parametrize("parse", [parse_json, parse_yaml])
def test_integers_beyond_float_precision_are_refused(parse: Any) -> None:
    with pytest.raises(ParseError, match="cannot be represented exactly"):
        parse(b'{"a": 9007199254740993}')
    # A large integer a 64-bit float holds exactly reads back as that float.
    assert parse(b'{"a": 10000000000000000}') == {"a": 1e16}


def _depth_of(value: Any) -> int:
    """The nesting the limit counts, walked one value at a time (the rule as first written)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _wrapped(depth: int, leaf: Any, in_dict: bool) -> Any:
    value = leaf
    for i in range(depth):
        value = {"k": value} if (in_dict and i % 2) else [value, 1] if i % 3 == 0 else [value]
    return value


@settings(max_examples=300)
@given(
    st.integers(min_value=MAX_DEPTH - 4, max_value=MAX_DEPTH + 2),
    st.sampled_from([1, "s", None, [], {}, [2], {"a": 1}]),
    st.booleans(),
)
def test_the_level_walk_refuses_exactly_what_the_value_walk_refuses(
    depth: int, leaf: Any, in_dict: bool
) -> None:
    """Around the limit, with scalar, empty and non-empty leaves in lists and objects."""
    document = json.dumps(_wrapped(depth, leaf, in_dict)).encode()
    too_deep = _depth_of(json.loads(document)) > MAX_DEPTH
    if too_deep:
        with pytest.raises(TooLargeError, match="nesting"):
            parse_json(document)
    else:
        parse_json(document)


_stored_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e20, -1e16, 2.0**60, 9007199254740992.0, 1e308])
    | st.text(alphabet='0123456789abc"\\é', max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            # NUL and lone surrogates are refused at admission (no text column stores them,
            # and a lone surrogate has no canonical form): see below.
            st.text(
                st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=6
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=16,
)


@given(_stored_values)
def test_stored_payloads_read_back_as_admission_read_them(value: object) -> None:
    """What the store's readers (folds, history, export) make of an admitted payload is
    what admission made of it: canonical JSON writes floats beyond 2^53 as integer
    literals, which msgspec alone reads as ints."""
    data = canonical_json(value)
    admitted = parse_json(data)  # every canonical text is admitted (see the property below)
    stored = parse_admitted_json(data)
    assert stored == admitted == value
    assert canonical_json(stored) == data  # and it canonicalises again, as admission's does
    assert json.dumps(stored, sort_keys=True) == json.dumps(admitted, sort_keys=True)


# Strings as a signer's own JSON text may spell them: each UTF-16 code unit written as itself
# or as a \\uXXXX escape, surrogates (paired, lone, reversed) often among them.
_code_units = st.integers(0xD7F0, 0xE010) | st.integers(0, 0xFFFF) | st.sampled_from([0x22, 0x5C])


@st.composite
def _json_string(draw: st.DrawFn) -> str:
    spelled = []
    for unit in draw(st.lists(_code_units, max_size=6)):
        plain = unit >= 0x20 and unit not in (0x22, 0x5C) and not 0xD800 <= unit <= 0xDFFF
        if plain and draw(st.booleans()):
            spelled.append(chr(unit))
        else:
            spelled.append(f"\\u{unit:04x}" if draw(st.booleans()) else f"\\u{unit:04X}")
    return '"' + "".join(spelled) + '"'


_json_texts = st.recursive(
    _json_string()
    | st.sampled_from(["0", "-0", "1.5", "1e20", "100000000000000000000", "null", "true"]),
    lambda inner: (
        st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]")
        | st.lists(st.tuples(_json_string(), inner), max_size=4).map(
            lambda pairs: "{" + ",".join(f"{k}: {v}" for k, v in pairs) + "}"
        )
    ),
    max_leaves=12,
)


def _typed(value: object) -> object:
    """The value with every scalar's type kept, so that 1 and 1.0 (or True) differ."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


@settings(max_examples=400)
@given(_json_texts)
def test_what_admission_reads_the_store_reads_alike_and_canonical_json_writes(text: str) -> None:
    """Any JSON text a signer may send: if the strict reader admits it, the store's reader
    (msgspec, for folds, history and export) reads the same value, and canonical JSON can
    write it. A lone surrogate escape (``"\\ud800"``) was admitted and then stopped every
    fold, for every run, for good (found by an attack review)."""
    data = text.encode("utf-8")
    try:
        admitted = parse_json(data)
    except ParseError:
        return
    assert _typed(parse_admitted_json(data)) == _typed(admitted)
    assert parse_json(canonical_json(admitted)) == admitted


@pytest.mark.parametrize(
    "text",
    [
        r'{"a": "\ud800"}',
        r'{"a": "x\uDC00y"}',
        r'{"\ud83d": 1}',
        r'["\ude00\ud83d"]',
        r'{"a": {"b": ["ok", "\udfff"]}}',
    ],
    ids=["lone high", "lone low", "in a key", "reversed pair", "nested"],
)
def test_a_lone_surrogate_is_refused_by_every_reader(text: str) -> None:
    for parse in (parse_json, parse_document):
        with pytest.raises(ParseError, match=r"lone surrogate U\+D[89A-F][0-9A-F]{2}"):
            parse(text.encode())
    with pytest.raises(ParseError, match="lone surrogate"):
        parse_yaml(text.encode())


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_json, r'{"title": "evil\u0000title"}'),
        (parse_json, r'{"a": [{"\u0000": 1}]}'),
        (parse_document, r'{"a": "\u0000"}'),
        (parse_yaml, r'title: "evil\0title"'),
        (parse_yaml, r'a: ["\x00"]'),
    ],
    ids=["json value", "json key", "document", "yaml \\0", "yaml \\x00"],
)
def test_nul_is_refused_by_every_reader(parse: Any, text: str) -> None:
    """PostgreSQL's text cannot hold NUL and the views copy manifest text into text columns:
    a run titled with one was admitted, then stopped every fold on PostgreSQL, for good."""
    with pytest.raises(ParseError, match=r"U\+0000 \(NUL\)"):
        parse(text.encode())
    assert parse_json(rb'["\\u0000"]') == ["\\u0000"]  # an escaped backslash is no NUL


def test_a_surrogate_pair_is_the_character_it_spells() -> None:
    assert parse_json(rb'{"a": "\ud83d\ude00"}') == {"a": "\U0001f600"}
    assert parse_yaml(rb'a: "\U0001F600"') == {"a": "\U0001f600"}


@settings(max_examples=500)
@given(
    st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(min_value=2.0**53, max_value=1e21)
    | st.floats(min_value=-1e21, max_value=-(2.0**53))
)
def test_every_number_jcs_writes_reads_back_as_the_number_it_wrote(number: float) -> None:
    """JCS writes a float between 2^53 and 10^21 as an integer literal of its shortest
    digits padded with zeros (5.404319552843937e16 as 54043195528439370), which no float may
    hold exactly: each reader must still read the float back, or an honest document written
    by a JCS library is refused (found by the stored-payload property)."""
    data = canonical_json({"v": number})
    for read in (parse_json, parse_admitted_json, parse_yaml):
        assert read(data) == {"v": number}
        assert canonical_json(read(data)) == data


@pytest.mark.parametrize("parse", [parse_json, parse_yaml])
def test_integers_neither_exact_nor_jcs_spelled_are_refused(parse: Any) -> None:
    # 54043195528439370 is JCS's spelling of 5.404319552843937e16 and 54043195528439368 the
    # float's exact value: both read as that float. 54043195528439371 is neither.
    assert parse(b'{"a": 54043195528439370}') == parse(b'{"a": 54043195528439368}')
    with pytest.raises(ParseError, match="cannot be represented exactly"):
        parse(b'{"a": 54043195528439371}')
