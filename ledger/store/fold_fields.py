"""What a fold reads of each event, written beside it at commit (``event_fold_fields``).

A projection rebuild used to decode every stored event to fold it: the stored JSON, the
envelope's base64 payload, then the statement (``ledger.store.event_fields``), most of an
event's cost. The commit has the typed event in hand, so it writes, in the same transaction
and per event, the few values a fold uses (:class:`FoldFields`: the run event's name, the
run it is about, when the ledger received it, the signer it accepted, a supersession's
``superseded_by`` and the statement's predicate, as the JSON text the statement signs) as
one MessagePack value. A rebuild reads that row and decodes it with msgspec, never the
envelope.

The manifest documents most runs share (protocol, environment, …) are stored once, by the
hash of their text (``ledger.store.fold_manifests``): a row's predicate has them cut out
and names them by key (``FoldFields.shared``, made by :func:`row_of`, the one rule every
writer calls); a reader splices them back (:func:`whole`), and where one is missing or not
the document its key names, folds the event from its state as if it had no row.

One function makes a row's fields, :func:`fields_of_payload`, from the envelope's payload:
the commit calls it on each typed event (``write_fold_fields``), and so do the backfill of
events stored before this table existed (:func:`backfill`, schema version 5, on the events
the ledger's mapper decodes) and the fold of an event with no row (a backfill that could
not decode it, an event saved outside the commit), which reads its payload from the stored
state as before. The fold's result is the same either way
(``tests/projections/test_rebuild_from_fold_fields.py`` holds it, on SQLite and PostgreSQL).

The commit only cuts the predicate's text out of the payload (it parses nothing into
objects: a few µs an event); the fold parses it with ``parse_admitted_json``, the reader the
whole statement was read with before (``ledger.signing.dsse.stored_statement``): a value
with an integer beyond 2^53 in it is one it reads with the strict reader either way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec
from eventsourcing.persistence import Mapper, StoredEvent
from sqlalchemy import (
    BigInteger,
    Column,
    LargeBinary,
    MetaData,
    Table,
    bindparam,
    column,
    select,
    table,
    update,
)
from sqlalchemy.engine import Connection

from domain.documents import needs_strict_reread, parse_admitted_json
from domain.event_names import EventName
from ledger.ids import topic_of
from ledger.signing.dsse import Envelope, stored_payload
from ledger.store import fold_manifests
from ledger.store.driver_rows import insert_tables
from ledger.store.event_store import StoreSession
from ledger.store.fold_manifests import Shared

__all__ = [
    "RUN_EVENT_TOPICS",
    "FoldFields",
    "Handed",
    "backfill",
    "decode_fields",
    "encode_fields",
    "event_fold_fields",
    "fields_of_event",
    "fields_of_payload",
    "fields_of_stored",
    "handed_payloads",
    "predicate_of",
    "predicate_with",
    "row_disagrees",
    "row_of",
    "share_rows",
    "subject_of",
    "whole",
    "write_fold_fields",
]

_log = logging.getLogger(__name__)

metadata = MetaData()
event_fold_fields = Table(
    "kernelindex_event_fold_fields",
    metadata,
    Column("position", BigInteger, primary_key=True, autoincrement=False),  # the event's id
    Column("fields", LargeBinary, nullable=False),  # FoldFields, MessagePack
)

# The topics run events are stored under (``ledger.ids.topic_of``: the store imports no
# aggregates).
RUN_EVENT_TOPICS: dict[str, EventName] = {
    topic_of(name): name
    for name in (
        EventName.RUN_INGESTED,
        EventName.RUN_ATTESTED,
        EventName.RUN_RETRACTED,
        EventName.RUN_SUPERSEDED,
        EventName.RUN_MANIFESTS_ATTACHED,
        EventName.RUN_RERUN_REQUESTED,
        EventName.RUN_RERUN_CLAIMED,
        EventName.RUN_RERUN_RECORDED,
    )
}
_NAMES: dict[str, EventName] = {str(name): name for name in RUN_EVENT_TOPICS.values()}


class FoldFields(msgspec.Struct, array_like=True, frozen=True):
    """A stored event as a fold reads it. ``name`` None: no run event (the key book's),
    nothing to fold but its position."""

    name: str | None
    subject: str = ""  # the run's digest, "sha256:…"
    received_at: str = ""
    signer: str = ""
    superseded_by: str | None = None  # a supersession's (None for the other events)
    predicate: bytes = b"null"  # the statement's predicate: its JSON text, as signed
    # The manifest documents cut out of ``predicate`` (``ledger.store.fold_manifests``):
    # where, and their keys. Empty: ``predicate`` is whole (every row of schema 5).
    shared: Shared = ()

    @property
    def event_name(self) -> EventName | None:
        return None if self.name is None else _NAMES[self.name]


_NOTHING = FoldFields(None)
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(FoldFields)


def encode_fields(fields: FoldFields) -> bytes:
    return _ENCODER.encode(fields)


def decode_fields(data: bytes) -> FoldFields:
    """A row's fields (raises ``msgspec.DecodeError``/``ValidationError`` on a damaged one,
    or one naming an event this build does not know)."""
    fields = _DECODER.decode(data)
    if fields.name is not None and fields.name not in _NAMES:
        raise msgspec.ValidationError(f"no run event is named {fields.name!r}")
    return fields


def subject_of(statement: dict[str, Any]) -> str:
    """The run a statement is about, as the views name it."""
    return "sha256:" + str(statement["subject"][0]["digest"]["sha256"])


class _Statement(msgspec.Struct):
    """What a row takes of a statement: its subject, and its predicate's text uncut."""

    subject: Any
    predicate: msgspec.Raw = msgspec.Raw(b"null")


_STATEMENT = msgspec.json.Decoder(_Statement)


def fields_of_payload(
    name: EventName, payload: bytes, received_at: Any, signer: Any, superseded_by: str | None
) -> FoldFields:
    """A run event's fields from its envelope's payload (the statement's JSON, admitted)
    and what the ledger stored beside it."""
    statement = _STATEMENT.decode(payload)
    return FoldFields(
        str(name),
        subject_of({"subject": statement.subject}),
        received_at,
        signer,
        superseded_by if name is EventName.RUN_SUPERSEDED else None,
        bytes(statement.predicate),
    )


def predicate_of(fields: FoldFields) -> Any:
    """The predicate a row holds (whole: see :func:`whole`), read as the statement it came
    from was read."""
    return parse_admitted_json(fields.predicate)


def row_of(fields: FoldFields) -> tuple[bytes, dict[bytes, bytes]]:
    """The row stored of an event's fields, and the shared documents it names by key: the
    one rule for every writer (the commit, the backfill, the upgrade's rewrite, ``audit``)."""
    cut, shared, bodies = fold_manifests.split(fields.predicate)
    if shared:
        fields = msgspec.structs.replace(fields, predicate=cut, shared=shared)
    return encode_fields(fields), bodies


def whole(fields: FoldFields, bodies: Mapping[bytes, bytes]) -> FoldFields | None:
    """A row's fields with the documents it names by key spliced back into its predicate;
    None where one of them is not in ``bodies`` (then the fold decodes the event)."""
    if not fields.shared:
        return fields
    predicate = fold_manifests.join(fields.predicate, fields.shared, bodies)
    if predicate is None:
        return None
    return msgspec.structs.replace(fields, predicate=predicate, shared=())


def predicate_with(fields: FoldFields, bodies: Mapping[bytes, bytes]) -> Any:
    """``predicate_of(whole(fields, bodies))`` with each shared document parsed once, not
    once per row (most of a predicate's bytes are the few documents thousands of runs share):
    the cut text is parsed with a placeholder where each document was cut, and the document's
    parsed value (kept by its text: a value made of that text alone) put where its
    placeholder is, as ``predicate["manifests"][role]`` (where ``split`` cuts documents
    from). Anything else (a placeholder not found there, a long integer, a document not an
    object) takes the whole road, so the value is the one ``predicate_of`` gives either way
    (``tests/ledger/test_fold_parsed.py``). None: a document missing from ``bodies``. The
    documents' values are shared between rows: a fold reads them, never changes them."""
    if not fields.shared:
        return predicate_of(fields)
    cut = fields.predicate
    texts = [bodies[key] for _, key in fields.shared if key in bodies]
    if len(texts) != len(fields.shared):
        return None
    value = _placeheld(cut, fields.shared) if _NUL_ESCAPE not in cut else None
    manifests = value.get("manifests") if type(value) is dict else None
    if type(manifests) is dict:
        found = 0
        for role, held in manifests.items():
            if type(held) is str and held[:1] == "\x00":
                document = _parsed(texts[int(held[1:])])
                if document is _WHOLE_ROAD:
                    break
                manifests[role] = document
                found += 1
        else:
            if found == len(texts):
                return value
    whole_fields = whole(fields, bodies)
    return None if whole_fields is None else predicate_of(whole_fields)


# A placeholder names the document cut out at its place by its index in ``shared``: a NUL
# escape, which no cut text holds where this road is taken, so every one found is one made.
_NUL_ESCAPE = b"\\u0000"
_WHOLE_ROAD: Any = object()


def _placeheld(cut: bytes, shared: Shared) -> Any:
    """The cut text parsed with a placeholder string at each place a document was cut;
    ``_WHOLE_ROAD`` where ``parse_admitted_json`` would not read it with msgspec alone."""
    pieces: list[bytes] = []
    at = 0
    for index, (offset, _) in enumerate(shared):
        pieces += (cut[at:offset], b'"%s%d"' % (_NUL_ESCAPE, index))
        at = offset
    pieces.append(cut[at:])
    text = b"".join(pieces)
    if needs_strict_reread(text):  # no run of digits crosses a document's { }: as whole
        return _WHOLE_ROAD
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return _WHOLE_ROAD


def _parsed(body: bytes) -> Any:
    """A shared document's value, parsed once per text (bounded, as ``fold_manifests``'s
    keys are); ``_WHOLE_ROAD`` for one this road does not take (not an object, a long run
    of digits, not JSON)."""
    value = _PARSED.get(body)
    if value is None:
        value = _WHOLE_ROAD
        if body[:1] == b"{" and body[-1:] == b"}" and not needs_strict_reread(body):
            try:
                value = msgspec.json.decode(body)
            except msgspec.DecodeError:
                value = _WHOLE_ROAD
            if type(value) is not dict:
                value = _WHOLE_ROAD
        if len(body) > _PARSED_LARGEST:
            return value  # parsed each time: a large one's objects are ~10x its text
        if len(_PARSED) >= _PARSED_KEPT or _PARSED_TEXT[0] + len(body) > _PARSED_TEXT_BUDGET:
            _PARSED.clear()
            _PARSED_TEXT[0] = 0
        _PARSED[body] = value
        _PARSED_TEXT[0] += len(body)
    return value


_PARSED: dict[bytes, Any] = {}
_PARSED_TEXT = [0]  # the bytes of text _PARSED's documents were parsed from
_PARSED_KEPT = 4096  # as many as a reader keeps texts of (``ManifestBodies``)
# A parsed document holds ~10-12x its text in objects where admission lets it through (25x
# for shapes it refuses; an attack review's tracemalloc). So only documents of at most 16
# KiB are kept, as ``fold_manifests`` keeps keys, and at most 8 MiB of text in all (~100 MB
# of objects per folding process): 4,096 documents of 16 KiB would have kept ~0.8 GB.
_PARSED_LARGEST = 16 << 10
_PARSED_TEXT_BUDGET = 8 << 20


# Payloads the writer decoded already, by the id of the base64 text they were decoded from:
# (that very text, kept alive so its id is not reused, and its bytes).
Handed = Mapping[int, tuple[str, bytes]]
_NONE_HANDED: Handed = {}


def handed_payloads(envelopes: Iterable[object]) -> dict[int, tuple[str, bytes]]:
    """The payloads of the parsed envelopes (``Envelope``, or a ``Checked`` one) among a
    group's, for :func:`write_fold_fields`. An ``Envelope``'s ``payload`` is its ``raw``
    payload text strictly decoded (``parse_envelope``: canonical standard base64, which
    ``stored_payload`` reads to the same bytes); an event whose stored envelope holds that
    very text object (``_signed`` copies ``raw``, not its strings) stores those bytes."""
    handed: dict[int, tuple[str, bytes]] = {}
    for item in envelopes:
        envelope = getattr(item, "envelope", item)
        if type(envelope) is Envelope:
            text = envelope.raw.get("payload")
            if type(text) is str:
                handed[id(text)] = (text, envelope.payload)
    return handed


def fields_of_event(event: object, handed: Handed = _NONE_HANDED) -> FoldFields | None:
    """The fold's fields of a typed event (the commit's, or the mapper's), or None where
    they cannot be made exactly (then the fold reads the stored event itself). ``handed``:
    payloads already decoded (:func:`handed_payloads`), taken only for the very text object
    they were decoded from; any other payload is decoded here."""
    cls = type(event)
    name = RUN_EVENT_TOPICS.get(f"{cls.__module__}:{cls.__qualname__}")
    if name is None:
        return _NOTHING
    received_at = getattr(event, "received_at", None)
    signer = getattr(event, "signer", None)
    if type(received_at) is not str or type(signer) is not str:
        return None  # not the strings run events store: not this row's shape
    superseded_by = getattr(event, "superseded_by", None)
    if superseded_by is not None and type(superseded_by) is not str:
        return None
    try:
        # The payload as ``stored_statement`` takes it from the envelope.
        text = event.envelope["payload"]  # type: ignore[attr-defined]
        got = handed.get(id(text))
        payload = got[1] if got is not None and got[0] is text else stored_payload(text)
        return fields_of_payload(name, payload, received_at, signer, superseded_by)
    except Exception:
        _log.debug("no fold fields for an event of %s", name, exc_info=True)
        return None


def fields_of_stored(
    mapper: Mapper[Any], originator_id: Any, version: int, topic: str, state: bytes
) -> tuple[bytes, dict[bytes, bytes]] | None:
    """The row the commit makes of a stored event (decoded by the ``mapper``, as the ledger
    reads it back), and the shared documents it names (:func:`row_of`); None where it makes
    none (an event the mapper cannot decode, or whose fields cannot be made exactly). The
    backfill stores it and ``audit`` compares the stored row with it."""
    try:
        event = mapper.to_domain_event(StoredEvent(originator_id, version, topic, state))
    except Exception:
        _log.debug("stored event not decoded for its fold fields", exc_info=True)
        return None
    fields = fields_of_event(event)
    return None if fields is None else row_of(fields)


def row_disagrees(
    mapper: Mapper[Any], originator_id: Any, version: int, topic: str, state: bytes, row: bytes
) -> str | None:
    """Why a stored row is not the one :func:`fields_of_stored` makes of its stored event
    (``audit``'s ``fold-fields`` finding), or None where it is, byte for byte. The reason
    names the fields that differ, never their values: the event is the truth."""
    remade = fields_of_stored(mapper, originator_id, version, topic, state)
    if remade is None:
        return "a fold fields row beside an event the commit makes none of (inserted?)"
    made = remade[0]  # its documents are checked against their keys (``wrong_bodies``)
    if made == row:
        return None
    try:
        stored = decode_fields(row)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return f"{_DIFFERS}: the row does not decode ({exc})"
    event = decode_fields(made)
    names = [n for n in FoldFields.__struct_fields__ if getattr(event, n) != getattr(stored, n)]
    return f"{_DIFFERS}: " + (", ".join(names) if names else "its encoding")


_DIFFERS = "fold fields row is not the one its stored event makes (rebuilt views would differ)"


def write_fold_fields(
    session: StoreSession, events: Iterable[tuple[int, object]], handed: Handed = _NONE_HANDED
) -> None:
    """The commit's rows: (position, typed event) of each event it stores, in its
    transaction. An event whose fields cannot be made gets no row (the fold decodes it).
    ``handed``: the group's payloads already decoded (:func:`handed_payloads`)."""
    rows = []
    bodies: dict[bytes, bytes] = {}
    for position, event in events:
        fields = fields_of_event(event, handed)
        if fields is not None:
            row, shared = row_of(fields)
            rows.append((position, row))
            bodies.update(shared)
    _insert(session, rows, bodies)


def _insert(
    connection: StoreSession, rows: Sequence[tuple[int, bytes]], bodies: Mapping[bytes, bytes]
) -> None:
    """Through the driver, in one statement where it can (the commit's own row writer)."""
    insert_tables(
        connection,
        [
            fold_manifests.insert_of(bodies),
            (event_fold_fields.name, ("position", "fields"), rows, ()),
        ],
    )


_PAGE = 1000


def backfill(connection: Connection, events_table: str, mapper: Mapper[Any]) -> int:
    """Rows for the stored events that have none (those committed before this table
    existed), made by :func:`fields_of_stored` from the ``mapper``'s typed events; return how
    many. An event the mapper cannot decode gets none (the fold decodes it, or says why it
    cannot). Idempotent: a rerun finds only what is still missing."""
    # Untyped columns: the values as the driver gives them (a reflected table's guessed
    # types would convert them; the mapper takes what the recorder reads).
    events = table(
        events_table,
        column("id"),
        column("originator_id"),
        column("originator_version"),
        column("topic"),
        column("state"),
    )
    e = events.c
    f = event_fold_fields.c
    made = 0
    after = 0
    while True:
        rows = connection.execute(
            select(e.id, e.originator_id, e.originator_version, e.topic, e.state)
            .select_from(events.outerjoin(event_fold_fields, f.position == e.id))
            .where(e.id > after, f.position.is_(None))
            .order_by(e.id)
            .limit(_PAGE)
        ).all()
        if not rows:
            return made
        found = []
        bodies: dict[bytes, bytes] = {}
        for position, originator_id, version, topic, state in rows:
            row = fields_of_stored(mapper, originator_id, int(version), str(topic), bytes(state))
            if row is not None:
                found.append((int(position), row[0]))
                bodies.update(row[1])
        _insert(connection, found, bodies)
        made += len(found)
        after = int(rows[-1][0])


def share_rows(connection: Connection) -> int:
    """Schema 6: every row stored by schema 5's commit (its predicate whole) rewritten as
    :func:`row_of` makes it now, its shared documents stored once; return how many. Made
    from the row itself, as the commit made it from the event; a row that does not decode
    stays as it is (``audit`` names it). Idempotent."""
    f = event_fold_fields.c
    changed = 0
    after = -1
    while True:
        page = connection.execute(
            select(f.position, f.fields).where(f.position > after).order_by(f.position).limit(_PAGE)
        ).all()
        if not page:
            return changed
        rewritten = []
        bodies: dict[bytes, bytes] = {}
        for position, stored in page:
            try:
                fields = decode_fields(bytes(stored))
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if fields.shared:
                continue  # written by this schema already
            row, shared = row_of(fields)
            if row != bytes(stored):
                rewritten.append({"at": int(position), "row": row})
                bodies.update(shared)
        fold_manifests.write(connection, bodies)
        if rewritten:
            connection.execute(
                update(event_fold_fields)
                .where(f.position == bindparam("at"))
                .values(fields=bindparam("row")),
                rewritten,
            )
        changed += len(rewritten)
        after = int(page[-1][0])
