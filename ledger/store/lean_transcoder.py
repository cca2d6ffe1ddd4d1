"""The bytes an event's state is stored as: eventsourcing's ``JSONTranscoder``'s, made by msgspec.

The mapper encodes a stored event's state with the standard library's JSON encoder
(``separators=(",", ":")``, ``ensure_ascii=False``, every other type through a registered
transcoding as ``{"_type_": name, "_data_": ...}``, through a Python hook). Its string
escaping alone cost ~123 k instructions a signed ingestion (callgrind), nearly all of it the
envelope's base64 payload; msgspec writes the same bytes for ~20 k (issue 36: the writer's own
work, benchmarks/README.md "writer2").

The same bytes, not similar ones: what is stored is hashed into log leaves and read by
verifiers. ``LeanJSONTranscoder.encode`` takes msgspec's road only for a state of plain JSON
values (exact ``dict`` with ``str`` keys, ``list``, ``str``, ``int``, ``bool``, ``None``) and
top-level values of a registered transcoding whose data are plain too, where the two encoders
are tested to agree (``tests/ledger/test_lean_transcoder.py``: every code point, and a property
against the standard encoder). Anything else (a float, whose text the two encoders write
differently; a subclass; an unregistered type; text the UTF-8 codec refuses) goes to the
standard encoder, which stores it, or refuses it, as before. Decoding is the transcoder's own.
"""

from __future__ import annotations

from typing import Any

import msgspec
from eventsourcing.persistence import JSONTranscoder

_SCALARS = frozenset({str, int, bool, type(None)})
# Deeper than any stored state the ledger makes; deeper ones take the standard road.
_DEPTH = 32
_ENCODE = msgspec.json.Encoder().encode


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` holds only values both encoders write alike (loops, not generators:
    this walk runs over every stored state)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if depth > _DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _SCALARS and not _plain(item, depth + 1)):
                return False
        return True
    if kind is list:
        for item in value:
            if type(item) not in _SCALARS and not _plain(item, depth + 1):
                return False
        return True
    return False


class LeanJSONTranscoder(JSONTranscoder):
    """``JSONTranscoder`` whose ``encode`` returns the same bytes sooner (module docstring)."""

    def encode(self, obj: Any) -> bytes:
        shaped = self._shaped(obj)
        if shaped is not None:
            try:
                return _ENCODE(shaped)
            except (UnicodeEncodeError, msgspec.EncodeError, OverflowError, RecursionError):
                pass  # a lone surrogate, say: the standard road refuses it as it always did
        return super().encode(obj)

    def _shaped(self, obj: Any) -> dict[str, Any] | None:
        """``obj`` with each transcoded value as the standard road writes it, or None where
        that road alone may write it."""
        if type(obj) is not dict:
            return None
        shaped: dict[str, Any] = {}
        for key, value in obj.items():
            if type(key) is not str:
                return None
            if type(value) in _SCALARS or _plain(value):
                shaped[key] = value
                continue
            transcoding = self.types.get(type(value))
            if transcoding is None:
                return None
            data = transcoding.encode(value)
            if not _plain(data):
                return None
            shaped[key] = {"_type_": transcoding.name, "_data_": data}
        return shaped
