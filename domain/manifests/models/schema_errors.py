"""msgspec's error about a manifest, told as ``dotted.location: what is wrong``.

msgspec reports the first error only, as ``Expected `int` >= 1 - at `$.spec.cases[0].axes[...]```:
its path shows a map's value as ``[...]`` (without the key) and says nothing of the schema's
words (an ``anyOf``, an enumeration). So the path is walked again beside the document and the
model's types: the key is the first of the map that fails (msgspec checks items in order),
and the message comes from the type at the location. Only a refused manifest pays for this.
"""

from __future__ import annotations

import ast
import math
import re
import types
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

import msgspec

from domain.manifests.models.common import (
    ANY_OF_DESCRIPTIONS,
    INTEGERS,
    NUMBERS,
    PATTERN_DESCRIPTIONS,
    FieldError,
)

_AT: Final = " - at `"
_STEP: Final = re.compile(r"\.([A-Za-z0-9_]+)|\[([0-9]+)\]|(\[\.\.\.\])")
_UNKNOWN: Final = re.compile(r"Object contains unknown field `(.*)`\Z", re.DOTALL)
_MISSING: Final = re.compile(r"Object missing required field `(.*)`\Z", re.DOTALL)
_WRONG_TYPE: Final = re.compile(r"Expected `([^`]*)`, got `[^`]*`\Z")
_PATTERN: Final = re.compile(r"Expected `str` matching regex (.*)\Z", re.DOTALL)
_LENGTH: Final = re.compile(r"Expected `(str|array|object)` of length (<=|>=) ([0-9]+)\Z")
_BOUND: Final = re.compile(r"Expected `(?:int|float)` (<=|>=|<|>) (\S+)\Z")
_NOT_INTEGRAL: Final = re.compile(r"Expected `float` that's a multiple of ")

_TYPE_WORDS: Final = {
    "str": "a string",
    "bool": "a boolean",
    "array": "an array",
    "object": "an object",
    "int": "an integer",
    "float": "a number",
    "int | float": "a number",
}
_BOUND_WORDS: Final = {
    "<=": "at most",
    ">=": "at least",
    "<": "less than",
    ">": "greater than",
}
_LENGTH_WORDS: Final = {
    ("str", "<="): "must be at most {} characters",
    ("array", ">="): "must have at least {} items",
    ("array", "<="): "must have at most {} items",
    ("object", ">="): "must have at least {} properties",
    ("object", "<="): "must have at most {} properties",
}


def describe(model: type, exc: msgspec.ValidationError, document: object) -> str:
    """``exc`` (from converting ``document`` into ``model``) as ``location: message``."""
    text = str(exc)
    # An unknown field's name is the author's text and may itself spell a location suffix
    # ("z` - at `$.spec"): msgspec adds none to an error of the whole document, so a name
    # the document holds is the whole name, and the error is at the top.
    found = _UNKNOWN.match(text)
    if found is not None and isinstance(document, dict) and found.group(1) in document:
        return f"{found.group(1)}: unknown field"
    message, at, where = text.rpartition(_AT)
    if not at:
        message, where = text, "$`"
    is_key = where.startswith("key` in `")  # a map's key broke its propertyNames
    steps = _STEP.findall(where.removeprefix("key` in `").removesuffix("`"))
    loc, value, annotation = _walk(model, document, steps)
    prefix = ""
    if is_key and isinstance(_structural(annotation), type):  # an object's field named by no string
        key = next(str(k) for k in value if not isinstance(k, str))
        return f"{'.'.join([*loc, key])}: unknown field"
    if is_key:
        key_type = _dict_types(annotation)[0]
        key = _first_failing(value, key_type, keys=True)
        loc, annotation, prefix = [*loc, key], key_type, "invalid property name: "
    cause = exc.__cause__
    if isinstance(cause, FieldError):
        loc.extend(cause.field.split("."))
        text = str(cause)
    elif (found := _UNKNOWN.match(message)) is not None:
        loc, text = [*loc, found.group(1)], "unknown field"
    elif (found := _MISSING.match(message)) is not None:
        loc, text = [*loc, found.group(1)], "required field missing"
    else:
        text = _message(message, annotation)
    return f"{'.'.join(loc) or '(root)'}: {prefix}{text}"


def _walk(
    model: type, document: object, steps: list[tuple[str, str, str]]
) -> tuple[list[str], Any, Any]:
    """The dotted location of msgspec's path ``steps``, the value there and its type."""
    loc: list[str] = []
    value: Any = document
    annotation: Any = model
    for name, index, in_map in steps:
        annotation = _structural(annotation)
        if name:
            fields = {f.encode_name: f.type for f in msgspec.structs.fields(annotation)}
            annotation, value = fields[name], value[name]
            loc.append(name)
        elif index:
            annotation, value = get_args(annotation)[0], value[int(index)]
            loc.append(index)
        elif in_map:
            annotation = _dict_types(annotation)[1]
            key = _first_failing(value, annotation, keys=False)
            value = value[key]
            loc.append(key)
    return loc, value, annotation


def _first_failing(mapping: dict[str, Any], annotation: Any, *, keys: bool) -> str:
    """The first key of ``mapping`` whose key (or value) ``annotation`` refuses."""
    for key, item in mapping.items():
        try:
            msgspec.convert(key if keys else item, annotation, strict=True)
        except msgspec.ValidationError:
            return str(key)
    raise AssertionError("msgspec refused an item that converts")  # pragma: no cover


def _members(annotation: Any) -> list[Any]:
    """The members of a union, less ``UnsetType`` (an optional field's absence)."""
    if get_origin(annotation) in (Union, types.UnionType):
        return [a for a in get_args(annotation) if a is not msgspec.UnsetType]
    return [annotation]


def _structural(annotation: Any) -> Any:
    """The struct, list or dict type a value of ``annotation`` that holds more has."""
    for member in _members(annotation):
        inner = member
        while get_origin(inner) is Annotated:
            inner = get_args(inner)[0]
        if isinstance(inner, type) or get_origin(inner) in (list, dict):
            return inner
    return annotation  # pragma: no cover - msgspec's path only goes through containers


def _dict_types(annotation: Any) -> tuple[Any, Any]:
    key, value = get_args(_structural(annotation))
    return key, value


def _is(annotation: Any, alias: Any) -> bool:
    return _members(annotation) == _members(alias)


def _literal(annotation: Any) -> tuple[Any, ...] | None:
    for member in _members(annotation):
        if get_origin(member) is Literal:
            return get_args(member)
    return None


def _message(message: str, annotation: Any) -> str:
    """msgspec's ``message`` about a value of ``annotation``, in the schema's words."""
    for alias, description in ANY_OF_DESCRIPTIONS:
        if _is(annotation, alias):
            return description
    integer = any(_is(annotation, alias) for alias in INTEGERS)
    number = any(_is(annotation, alias) for alias in NUMBERS)
    values = _literal(annotation)
    if values is not None:
        return "must be " + _either(values)
    if (found := _WRONG_TYPE.match(message)) is not None:
        expected = "an integer" if integer else "a number" if number else None
        return f"must be {expected or _TYPE_WORDS.get(found.group(1), found.group(1))}"
    return _constraint(message, number=number)


def _constraint(message: str, *, number: bool) -> str:
    """msgspec's ``message`` about a pattern, a length or a bound, in the schema's words."""
    if (found := _PATTERN.match(message)) is not None:
        pattern = ast.literal_eval(found.group(1))
        return PATTERN_DESCRIPTIONS.get(pattern, f"must match pattern {pattern}")
    if (found := _LENGTH.match(message)) is not None:
        template = _LENGTH_WORDS.get((found.group(1), found.group(2)))
        return message if template is None else template.format(found.group(3))
    if _NOT_INTEGRAL.match(message):
        return "must be an integer"
    if (found := _BOUND.match(message)) is not None:
        if number and "1.797" in found.group(2):  # only inf and NaN pass the float's bounds
            return "must be a finite number"
        bound = found.group(2).removesuffix(".0")
        return f"must be {_BOUND_WORDS[found.group(1)]} {bound}"
    return message


def _either(values: tuple[Any, ...]) -> str:
    quoted = [repr(value) for value in values]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def first_non_json(value: object) -> tuple[tuple[str, ...], str] | None:
    """The first location that no JSON text spells, and what is wrong: a lone surrogate, a
    key that is no string, a non-finite number, or a Python value that is no JSON value at
    all (a Decimal, tuple, set, bytes, a Mapping that is no dict); None if there is none.
    Document order, except that an object's keys are looked at before its values. A loop,
    not recursion: a document built in Python may nest deeper than the stack; each location
    is a link to its parent's, spelled out only for what is found."""
    stack: list[tuple[_Link, object]] = [(None, value)]
    while stack:
        link, item = stack.pop()
        if isinstance(item, str):
            if any("\ud800" <= c <= "\udfff" for c in item):
                return _spelled(link), "must not hold a lone surrogate"
        elif isinstance(item, dict):
            for key, inner in reversed(item.items()):
                stack.append(((link, str(key)), inner))
                stack.append(((link, str(key)), key))
            bad = next((key for key in item if not isinstance(key, str)), None)
            if bad is not None:
                return _spelled((link, str(bad))), "keys must be strings"
        elif isinstance(item, list):
            stack.extend(((link, str(i)), inner) for i, inner in reversed(list(enumerate(item))))
        elif isinstance(item, float):
            if not math.isfinite(item):
                return _spelled(link), "must be a finite number"
        elif not (item is None or isinstance(item, int)):  # bool is an int
            return _spelled(link), f"must be a JSON value, not a {type(item).__name__}"
    return None


_Link = tuple[Any, str] | None  # (the parent's link, this step) or None at the top


def _spelled(link: _Link) -> tuple[str, ...]:
    steps: list[str] = []
    while link is not None:
        link, step = link
        steps.append(step)
    return tuple(reversed(steps))
