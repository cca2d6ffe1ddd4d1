"""YAML 1.2 documents into plain JSON values (:func:`domain.documents.parse_yaml`).

Apart from :mod:`domain.documents` so that ruamel.yaml is imported only when a YAML document
is read, never by the processes that read only JSON (the store, the verifier, the server).
The rules are the documents' own: one document, the 1.2 core schema and no tags beyond it,
no merge or duplicate keys, the same size, depth and node budgets.
"""

from __future__ import annotations

import re

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from domain.documents import (
    MAX_DEPTH,
    MAX_NODES,
    JsonValue,
    _check_size,
    _decode,
    _int,
    _parse_float,
    _refuse_unstorable_strings,
    json_integer,
)
from domain.errors import ParseError, TooLargeError

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
