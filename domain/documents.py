"""Parsing untrusted JSON and YAML 1.2 documents into plain JSON values.

Both parsers return only JSON types (dict, list, str, int, float, bool, None) and refuse what
could make two readers disagree about a document: duplicate keys, NaN/Infinity, YAML tags
outside the core schema, other YAML versions, multiple documents. Budgets (size, nesting,
expanded nodes) bound the work an attacker can make us do.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Literal

import msgspec

from domain.canonical import es6_number
from domain.errors import ParseError, TooLargeError

MAX_DOCUMENT_BYTES = 1024 * 1024
MAX_DEPTH = 64
# Aliases are expanded into JSON; this caps the blow-up of "billion laughs" documents.
MAX_NODES = 200_000
MAX_SAFE_INTEGER = 2**53 - 1

JsonValue = Any
Format = Literal["json", "yaml"]


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
# The fast path's one translation of the compact text answers two questions: digits become
# "0" (a run of sixteen marks a long integer) and "[" becomes "{" (how many containers
# open: a bound on the depth). Two scans of the text fewer than asking each apart.
_DIGITS_AND_OPENERS = bytes.maketrans(b"0123456789[", b"0000000000{")


def _long_integer(compact: bytes, marked: bytes | None = None) -> bool:
    """Whether ``compact`` (msgspec's compact text) may hold an integer token of sixteen
    or more digits; ``marked``: its ``_DIGITS_AND_OPENERS`` translation, if made."""
    if marked is None:
        marked = compact.translate(_DIGITS_AS_ZERO)
    if marked.find(_SIXTEEN_DIGITS) < 0:
        return False
    return compact[:1] in b"-0123456789" or _INTEGER_TOKEN.search(compact) is not None


def parse_admitted_json(data: bytes) -> JsonValue:
    """JSON that ``parse_json`` accepted once (a payload the ledger stored), read to the same
    value, for the many readers of the store: msgspec alone, unless the text holds a run of
    16 digits anywhere (an integer beyond ±(2^53−1), which ``parse_json`` reads as a float,
    may be one), then ``parse_json`` itself. msgspec would read such an integer as an int,
    a value canonical JSON refuses: one attachment with ``1e20`` in it, admitted, stopped
    every fold (found by an attack review)."""
    if needs_strict_reread(data):
        return parse_json(data, max_bytes=len(data))
    return msgspec.json.decode(data)


def needs_strict_reread(data: bytes) -> bool:
    """Whether ``parse_admitted_json`` hands ``data`` to the strict reader rather than to
    msgspec alone: a run of 16 digits anywhere (an integer beyond ±(2^53−1) may be in it).
    The one rule for every reader that must read an admitted text as it does."""
    return data.translate(_DIGITS_AS_ZERO).find(_SIXTEEN_DIGITS) >= 0


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
      as there were duplicate keys (none, then, where the text is its re-encoding, as a
      compact signed statement is: one comparison instead of two counts);
    - integers beyond ±(2^53−1), which the strict reader turns into floats or refuses.
    """
    # A one-byte search first (most texts have no backslash at all), then the escape itself.
    if b"\\" in data and b"\\u" in data:
        return _NOT_DECIDED
    try:
        value = msgspec.json.decode(data)
        compact = msgspec.json.encode(value)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return _NOT_DECIDED
    marked = compact.translate(_DIGITS_AND_OPENERS)
    if (data != compact and data.count(b":") != compact.count(b":")) or _long_integer(
        compact, marked
    ):
        return _NOT_DECIDED
    # Fewer brackets than levels allowed: too few to nest too deep (most documents). The
    # compact text opens as many as ``data``: the same containers, and a string spells "["
    # or "{" only as itself (a ``\u`` escape never reaches here), as msgspec writes it.
    if marked.count(b"{") >= MAX_DEPTH:
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
# Compiled on first use: only a document with a ``\u`` escape is searched, and compiling
# the surrogate range costs a start-up ~2M instructions (issue 33).
@functools.cache
def _unstorable_pattern() -> re.Pattern[str]:
    return re.compile("[\x00\ud800-\udfff]")


def _refuse_unstorable_strings(value: JsonValue) -> None:
    """Refuse the first string or key that holds a character of ``_unstorable_pattern``."""
    found = _unstorable(value)
    if found == "\x00":
        raise ParseError("a string holds U+0000 (NUL), which no text column can store")
    if found is not None:
        raise ParseError(
            f"a string holds the lone surrogate U+{ord(found):04X}, which is no Unicode character"
        )


def _unstorable(value: JsonValue) -> str | None:
    if type(value) is str:
        match = _unstorable_pattern().search(value)
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
    """YAML 1.2 bytes (one document, the core schema) into JSON values, or ParseError."""
    # The YAML reader (and ruamel.yaml) loads on the first YAML document: most processes
    # read JSON only (the store, the verifier, the API).
    from domain.yaml_reader import parse_yaml as read  # noqa: PLC0415

    return read(data)
