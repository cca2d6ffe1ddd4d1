"""What a fold reads of a stored run event, decoded without building the typed event.

The ledger's eventsourcing mapper (``Mapper.to_domain_event``) reads a stored event's whole
state with the standard library's JSON reader and builds the typed event; the statement
inside then needs the envelope's payload base64-decoded and read again. A projection rebuild
does that for every event, and it is most of an event's cost. :class:`EventFieldReader`
reads only what a fold uses: the envelope's payload (base64-decoded by msgspec), the time
the ledger received the envelope, the signer it accepted, and a supersession's
``superseded_by``.

It answers only when its answer is the mapper's, and says ``None`` otherwise, for the caller
to decode that row with the mapper: a topic that does not resolve to one of the classes it
was given (the key book's events, a class whose stored form is upcast), a mapper that is not
eventsourcing's own with its JSON transcoder and no cipher or compressor, a state that is
not UTF-8 (the mapper decodes it strictly), a state msgspec refuses (a payload that is not
standard padded base64, NaN, a lone surrogate…) or whose fields are not the plain strings
run events store. The property is tested against the mapper itself
(``tests/ledger/test_event_fields.py``).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, Literal, NamedTuple

import msgspec
from eventsourcing.persistence import JSONTranscoder, Mapper
from eventsourcing.utils import resolve_topic

from domain.documents import parse_admitted_json
from ledger.store.lean_transcoder import LeanJSONTranscoder

__all__ = ["EventFieldReader", "EventFields", "statement_of_payload"]


class _Envelope(msgspec.Struct):
    payload: bytes  # msgspec decodes standard padded base64, refusing anything else


class _Timestamp(msgspec.Struct, forbid_unknown_fields=True, rename={"name": "_type_"}):
    """The event's timestamp as the mapper's transcoder stores a datetime."""

    name: Literal["datetime_iso"]
    _data_: str


class _Signed(msgspec.Struct):
    """The stored fields of every signed run event a fold reads (others are skipped), and
    its timestamp, which the mapper's transcoder decodes (and may refuse)."""

    timestamp: _Timestamp
    envelope: _Envelope
    received_at: str
    signer: str


class _Superseded(msgspec.Struct):
    timestamp: _Timestamp
    envelope: _Envelope
    received_at: str
    signer: str
    superseded_by: str | None  # required: ``Run.Superseded`` always stores it


# The mapper's transcoder turns every object of exactly the keys "_type_" and "_data_" into
# a value (a datetime, a UUID...), and fails on one it cannot. A stored run event has one,
# its timestamp, read here as the transcoder reads it. A state that names "_type_" anywhere
# else, or spells any character as a \u escape (which could spell "_type_"), or nests
# deeper than the two JSON readers surely agree on, is left to the mapper.
_TYPE_KEY = b'"_type_"'
_NESTING = 200


_SIGNED = msgspec.json.Decoder(_Signed)
_SUPERSEDED = msgspec.json.Decoder(_Superseded)


class EventFields(NamedTuple):
    """A stored run event as a fold reads it."""

    event_class: type[Any]
    payload: bytes  # the envelope's payload: the signed statement's JSON bytes
    received_at: str
    signer: str
    superseded_by: str | None


def statement_of_payload(payload: bytes) -> dict[str, Any]:
    """The statement a stored envelope's payload holds, read as
    ``ledger.signing.dsse.stored_statement`` reads it once the base64 is undone."""
    statement: dict[str, Any] = parse_admitted_json(payload)
    return statement


class EventFieldReader:
    """Reads the fold's fields of stored events of ``classes`` (see the module docstring).

    ``superseding`` is the class whose events also store ``superseded_by``."""

    def __init__(
        self, mapper: Mapper[Any], classes: Collection[type[Any]], superseding: type[Any]
    ) -> None:
        self._classes = frozenset(classes)
        self._superseding = superseding
        self._by_topic: dict[str, type[Any] | None] = {}
        self.enabled = (
            type(mapper) is Mapper
            and type(mapper.transcoder) in (JSONTranscoder, LeanJSONTranscoder)
            and mapper.cipher is None
            and mapper.compressor is None
        )

    def read(self, topic: str, state: bytes) -> EventFields | None:
        """The fields of the stored event, or None: decode it with the mapper instead."""
        if not self.enabled:
            return None
        try:
            cls = self._by_topic[topic]
        except KeyError:
            cls = self._by_topic[topic] = self._class_of(topic)
        if cls is None:
            return None
        if not state.isascii():
            try:
                state.decode("utf-8")  # what the mapper's transcoder refuses, refused here too
            except UnicodeDecodeError:
                return None
        if (
            state.count(_TYPE_KEY) != 1
            or b"\\u" in state
            or state.count(b"{") + state.count(b"[") > _NESTING
        ):
            return None
        try:
            read: _Signed | _Superseded = (
                _SUPERSEDED.decode(state) if cls is self._superseding else _SIGNED.decode(state)
            )
            datetime.fromisoformat(read.timestamp._data_)  # as the transcoder decodes it
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, RecursionError):
            return None
        superseded = read.superseded_by if isinstance(read, _Superseded) else None
        return EventFields(cls, read.envelope.payload, read.received_at, read.signer, superseded)

    def _class_of(self, topic: str) -> type[Any] | None:
        try:
            cls = resolve_topic(topic)  # the mapper's own resolution (renamed topics included)
        except Exception:
            return None
        if cls not in self._classes or getattr(cls, "class_version", 1) != 1:
            return None  # not a run event, or one the mapper would upcast
        found: type[Any] = cls
        return found
