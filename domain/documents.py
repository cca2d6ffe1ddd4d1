"""Parsing untrusted JSON and YAML 1.2 documents into plain JSON values.

Both parsers return only JSON types (dict, list, str, int, float, bool, None) and refuse what
could make two readers disagree about a document: duplicate keys, NaN/Infinity, YAML tags
outside the core schema, other YAML versions, multiple documents. Budgets (size, nesting,
expanded nodes) bound the work an attacker can make us do.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import msgspec
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from domain.canonical import es6_number
from domain.errors import ParseError, TooLargeError

MAX_DOCUMENT_BYTES = 1024 * 1024
MAX_DEPTH = 64
# Aliases are expanded into JSON; this caps the blow-up of "billion laughs" documents.
MAX_NODES = 200_000
MAX_SAFE_INTEGER = 2**53 - 1

JsonValue = Any
Format = Literal["json", "yaml"]

_TAG = "tag:yaml.org,2002:"
_YAML_VERSION_DIRECTIVE = re.compile(r"^%YAML[ \t]+(\S+)", re.MULTILINE)
# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
_CORE_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_CORE_TRUE = re.compile(r"^(?:true|True|TRUE)$")
_CORE_FALSE = re.compile(r"^(?:false|False|FALSE)$")
_CORE_INT10 = re.compile(r"^[-+]?[0-9]+$")
_CORE_INT8 = re.compile(r"^0o[0-7]+$")
_CORE_INT16 = re.compile(r"^0x[0-9a-fA-F]+$")
_CORE_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_CORE_SPECIAL_FLOAT = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$")


def _check_size(data: bytes, limit: int = MAX_DOCUMENT_BYTES) -> None:
    if len(data) > limit:
        raise TooLargeError(
            f"document is {len(data)} bytes; the limit is {limit} bytes ({limit / 2**20:g} MiB)"
        )


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(f"document is not valid UTF-8 (byte {exc.start})") from None


def detect_format(data: bytes, filename: str | None = None) -> Format:
    """JSON by extension or by a leading '{' / '['; YAML otherwise."""
    if filename is not None:
        lowered = filename.lower()
        if lowered.endswith(".json"):
            return "json"
        if lowered.endswith((".yaml", ".yml")):
            return "yaml"
    head = data.lstrip()[:1]
    return "json" if head in (b"{", b"[") else "yaml"


def parse_document(
    data: bytes, fmt: Format | None = None, filename: str | None = None
) -> JsonValue:
    """Parse JSON or YAML 1.2 bytes into JSON values, or raise ParseError with a reason."""
    _check_size(data)
    chosen = fmt or detect_format(data, filename)
    return parse_json(data) if chosen == "json" else parse_yaml(data)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ParseError(f"duplicate key {key!r} in a JSON object")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ParseError(f"{name} is not a JSON number")


def json_integer(value: int) -> int | float:
    """An integer as a JSON number that canonicalises and reads back the same.

    Beyond ±(2^53−1) JCS writes a number as a float would print; such a value is kept if a
    64-bit float holds it exactly, or if it is spelled as JCS spells a float (the shortest
    digits, then zeros: 5.404319552843937e16 is written 54043195528439370, which no float
    holds exactly), and then it is that float; anything else is refused. So every number a
    JCS writer emits reads back as the value it wrote.
    """
    if abs(value) <= MAX_SAFE_INTEGER:
        return value
    try:
        as_float = float(value)
    except OverflowError:
        raise ParseError(
            "integer is out of range for a 64-bit float; carry it as a string"
        ) from None
    if as_float != value and es6_number(as_float) != str(value).encode("ascii"):
        raise ParseError(f"integer {value} cannot be represented exactly; carry it as a string")
    return as_float


def _int(text: str, base: int = 10) -> int:
    try:
        return int(text, base)
    except ValueError:  # Python refuses int literals over 4,300 digits (a DoS guard)
        raise ParseError(f"integer literal of {len(text)} digits is too long") from None


def _parse_int(text: str) -> int | float:
    return json_integer(_int(text))


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ParseError(f"number {text} is out of range for a 64-bit float")
    return value


def parse_json(data: bytes, max_bytes: int = MAX_DOCUMENT_BYTES) -> JsonValue:
    """Strict JSON (no duplicate keys, NaN or inexact integers); ``max_bytes`` for containers
    such as envelopes, whose documents inside keep the 1 MiB limit."""
    _check_size(data, max_bytes)
    value = _strict_fast(data)
    if value is not _NOT_DECIDED:
        return value
    return _parse_json_strictly(data)


_NOT_DECIDED: Any = object()
# Integers beyond ±(2^53−1) have 16 or more digits. A run of 16 digits is looked for with a
# byte translation (a regex over the whole text cost more than the parse); where one is
# found, it is an integer token if it starts the text or stands after "[", "," or ":" in
# msgspec's compact output. A string that merely holds such a run costs a regex search, and
# one that looks like a token sends the document to the strict reader: never a wrong answer.
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_SIXTEEN_DIGITS = b"0" * 16
_INTEGER_TOKEN = re.compile(rb"[\[,:]-?[0-9]{16}")


def _long_integer(compact: bytes) -> bool:
    if compact.translate(_DIGITS_AS_ZERO).find(_SIXTEEN_DIGITS) < 0:
        return False
    return compact[:1] in b"-0123456789" or _INTEGER_TOKEN.search(compact) is not None


def parse_admitted_json(data: bytes) -> JsonValue:
    """JSON that ``parse_json`` accepted once (a payload the ledger stored), read to the same
    value, for the many readers of the store: msgspec alone, unless the text holds a run of
    16 digits anywhere (an integer beyond ±(2^53−1), which ``parse_json`` reads as a float,
    may be one), then ``parse_json`` itself. msgspec would read such an integer as an int,
    a value canonical JSON refuses: one attachment with ``1e20`` in it, admitted, stopped
    every fold (found by an attack review)."""
    if data.translate(_DIGITS_AS_ZERO).find(_SIXTEEN_DIGITS) >= 0:
        return parse_json(data, max_bytes=len(data))
    return msgspec.json.decode(data)


def _strict_fast(data: bytes) -> JsonValue:
    """The value of ``data`` as the strict reader would give it, or ``_NOT_DECIDED``.

    msgspec parses standard JSON ~5x faster than ``json.loads`` with the strict hooks (a
    signed statement is parsed on every write, verify and history). It refuses NaN,
    Infinity, out-of-range floats, bad UTF-8, control characters and lone surrogates
    itself; what it lets through that the strict reader refuses is decided here, and
    anything not plainly acceptable goes to the strict reader, which has the last word:

    - duplicate keys (msgspec keeps the last): without ``\\u`` escapes, every ``:`` of the
      text outside a string separates a key from its value and every ``:`` inside one is
      literal, so the text holds as many more ``:`` than msgspec's re-encoding of the value
      as there were duplicate keys;
    - integers beyond ±(2^53−1), which the strict reader turns into floats or refuses.
    """
    if b"\\u" in data:
        return _NOT_DECIDED
    try:
        value = msgspec.json.decode(data)
        compact = msgspec.json.encode(value)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return _NOT_DECIDED
    if data.count(b":") != compact.count(b":") or _long_integer(compact):
        return _NOT_DECIDED
    # Fewer brackets than levels allowed: too few to nest too deep (most documents).
    if data.count(b"{") + data.count(b"[") >= MAX_DEPTH:
        try:
            _check_depth(value)
        except TooLargeError:
            return _NOT_DECIDED  # refused in the strict reader's own words
    return value


def _parse_json_strictly(data: bytes) -> JsonValue:
    """The reference reader: ``json.loads`` with a hook for every object and number."""
    text = _decode(data)
    try:
        value = json.loads(
            text,
            object_pairs_hook=_reject_duplicates,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise TooLargeError("JSON nesting is too deep") from None
    _check_depth(value)
    if b"\\u" in data:  # only an escape spells a surrogate or NUL: the text is valid UTF-8
        _refuse_unstorable_strings(value)
    return value


# What no string or key may hold. A lone surrogate is no Unicode character: I-JSON and
# RFC 8785 refuse it, and so does msgspec, the store's reader (a pair that an escape spells
# is one character by now). NUL: PostgreSQL's text cannot hold it, and the views copy
# manifest text (a run's title, a product) into text columns. Each was found admitted by an
# attack review, and then stopped every fold, for every run, for good.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _refuse_unstorable_strings(value: JsonValue) -> None:
    """Refuse the first string or key that holds a character of ``_UNSTORABLE``."""
    found = _unstorable(value)
    if found == "\x00":
        raise ParseError("a string holds U+0000 (NUL), which no text column can store")
    if found is not None:
        raise ParseError(
            f"a string holds the lone surrogate U+{ord(found):04X}, which is no Unicode character"
        )


def _unstorable(value: JsonValue) -> str | None:
    if type(value) is str:
        match = _UNSTORABLE.search(value)
        return match.group() if match else None
    if type(value) is dict:
        for key, item in value.items():
            found = _unstorable(key) or _unstorable(item)
            if found is not None:
                return found
    elif type(value) is list:
        for item in value:
            found = _unstorable(item)
            if found is not None:
                return found
    return None


def _check_depth(value: JsonValue) -> None:
    """No value deeper than ``MAX_DEPTH`` (the document itself is level 1).

    One level of containers at a time, in a comprehension: scalars are never visited one by
    one (this walk was half of an envelope's parse). A non-empty container at the last
    allowed level holds values one level too deep."""
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 1
    while level:
        if depth >= MAX_DEPTH and any(level):
            raise TooLargeError(f"document nesting exceeds {MAX_DEPTH} levels")
        level = [
            child
            for item in level
            for child in (item.values() if type(item) is dict else item)
            if type(child) is dict or type(child) is list
        ]
        depth += 1


def parse_yaml(data: bytes) -> JsonValue:
    _check_size(data)
    text = _decode(data)
    for match in _YAML_VERSION_DIRECTIVE.finditer(text):
        if match.group(1) != "1.2":
            raise ParseError(
                f"YAML version {match.group(1)} is not accepted; documents must be YAML 1.2"
            )
    loader = YAML(typ="safe", pure=True)
    try:
        nodes = list(loader.compose_all(text))
    except YAMLError as exc:
        raise ParseError(f"malformed YAML: {_one_line(exc)}") from None
    except RecursionError:
        raise TooLargeError("YAML nesting is too deep") from None
    if len(nodes) != 1 or nodes[0] is None:
        raise ParseError(f"expected exactly one YAML document, found {len(nodes)}")
    value = _YamlBuilder().build(nodes[0])
    if "\\" in text:  # YAML's escapes (\u, \U, \0, \x) alone spell a surrogate or NUL
        _refuse_unstorable_strings(value)
    return value


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


class _YamlBuilder:
    """Turns a composed YAML node graph into JSON values under the 1.2 core schema."""

    def __init__(self) -> None:
        self.count = 0

    def build(self, node: Node, depth: int = 1) -> JsonValue:
        self.count += 1
        if self.count > MAX_NODES:
            raise TooLargeError(f"YAML expands to more than {MAX_NODES} nodes (aliases?)")
        if depth > MAX_DEPTH:
            raise TooLargeError(f"document nesting exceeds {MAX_DEPTH} levels")
        where = f"line {node.start_mark.line + 1}"
        if isinstance(node, MappingNode):
            if node.tag != _TAG + "map":
                raise ParseError(f"{where}: YAML tag {node.tag} is not accepted")
            result: dict[str, JsonValue] = {}
            for key_node, value_node in node.value:
                key = self.build(key_node, depth + 1)
                if key_node.tag == _TAG + "merge":
                    raise ParseError(f"{where}: YAML merge keys ('<<') are not accepted")
                if not isinstance(key, str):
                    raise ParseError(f"{where}: mapping keys must be strings, got {key!r}")
                if key in result:
                    raise ParseError(f"{where}: duplicate key {key!r}")
                result[key] = self.build(value_node, depth + 1)
            return result
        if isinstance(node, SequenceNode):
            if node.tag != _TAG + "seq":
                raise ParseError(f"{where}: YAML tag {node.tag} is not accepted")
            return [self.build(item, depth + 1) for item in node.value]
        if isinstance(node, ScalarNode):
            return self._scalar(node, where)
        raise ParseError(f"{where}: unsupported YAML node")

    @staticmethod
    def _scalar(node: ScalarNode, where: str) -> JsonValue:
        value: str = node.value
        tag = str(node.tag)
        if tag == _TAG + "str":
            return value
        if tag not in _RESOLVABLE_TAGS:
            raise ParseError(f"{where}: YAML tag {tag} is not accepted")
        if node.style is not None:
            raise ParseError(
                f"{where}: an explicit tag on a quoted or block scalar is not accepted"
            )
        if tag == _TAG + "timestamp":
            # YAML 1.2 has no timestamp type: an ISO date stays the string it is.
            return value
        core_tag, resolved = _resolve_core(value, where)
        if core_tag != tag:
            # The YAML library and the 1.2 core schema disagree (e.g. '1_000', '!!int foo'):
            # readers would disagree too, so refuse rather than guess.
            raise ParseError(f"{where}: ambiguous scalar {value!r}; quote it if it is a string")
        return resolved


_RESOLVABLE_TAGS = frozenset(_TAG + t for t in ("int", "float", "bool", "null", "timestamp"))


def _resolve_core(value: str, where: str) -> tuple[str, JsonValue]:
    """(core schema tag, JSON value) of a plain scalar under the YAML 1.2 core schema."""
    if _CORE_NULL.match(value):
        return _TAG + "null", None
    if _CORE_TRUE.match(value):
        return _TAG + "bool", True
    if _CORE_FALSE.match(value):
        return _TAG + "bool", False
    if _CORE_INT10.match(value):
        return _TAG + "int", json_integer(_int(value, 10))
    if _CORE_INT8.match(value):
        return _TAG + "int", json_integer(_int(value[2:], 8))
    if _CORE_INT16.match(value):
        return _TAG + "int", json_integer(_int(value[2:], 16))
    if _CORE_SPECIAL_FLOAT.match(value):
        raise ParseError(f"{where}: {value} is not a JSON number")
    if _CORE_FLOAT.match(value):
        return _TAG + "float", _parse_float(value)
    return _TAG + "str", value
