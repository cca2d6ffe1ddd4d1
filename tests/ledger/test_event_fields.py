"""``ledger.store.event_fields`` reads a stored run event's fold fields as the ledger's mapper
does, or declines (hypothesis, against eventsourcing's own mapper):

* whenever the reader answers, the mapper decodes the same row to an event of that class
  with the same envelope payload (as ``stored_statement`` base64-decodes it), ``received_at``,
  ``signer`` and ``superseded_by``, and the statement read from the payload is
  ``stored_statement``'s;
* every well-formed stored run event (what the ledger writes) is answered;
* a row the mapper refuses is never answered.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from eventsourcing.application import Application
from eventsourcing.persistence import Mapper, StoredEvent
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from ledger.aggregates import Principal, Run, topic_of
from ledger.signing.dsse import stored_statement
from ledger.store.event_fields import EventFieldReader, EventFields, statement_of_payload
from tests.decoded_events import RUN_CLASSES

TOPICS = [topic_of(c.__qualname__) for c in RUN_CLASSES] + [
    topic_of("Principal.Registered"),
    "ledger.aggregates:Run.NoSuchEvent",
    "no.such.module:Event",
]


def ledger_mapper() -> Mapper[Any]:
    """A mapper made as the ledger's is (eventsourcing's defaults: JSON, no cipher)."""
    app: Application[Any] = Application(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
    return app.mapper


MAPPER = ledger_mapper()
READER = EventFieldReader(MAPPER, RUN_CLASSES, Run.Superseded)
ERROR = object()
# The fields of each run event class beside the signed ones (as the aggregates store them).
EXTRA: dict[type[Any], dict[str, Any]] = {
    Run.Ingested: {
        "run_digest": "sha256:" + "ab" * 32,
        "run_name": "ünïcode",
        "originator_topic": "ledger.aggregates:Run",
    },
    Run.Superseded: {"superseded_by": None},
    Run.ManifestsAttached: {"run_digest": "x", "roles": ["workload"]},
    Run.RerunRequested: {
        "job_id": "j",
        "nonce": "n",
        "expires_at": "t",
        "product": "p",
        "architecture": "a",
    },
    Run.RerunClaimed: {"job_id": "j", "lease_until": "t"},
    Run.RerunRecorded: {"job_id": "j"},
}


def mapper_fields(topic: str, state: bytes) -> EventFields | object:
    """What the fold reads of the row through the mapper (ERROR if any step raises)."""
    try:
        event = MAPPER.to_domain_event(StoredEvent(uuid.uuid4(), 1, topic, state))
        if type(event) not in RUN_CLASSES:
            return ERROR
        payload = event.envelope["payload"]
        if not isinstance(payload, str):
            return ERROR
        superseded = event.superseded_by if type(event) is Run.Superseded else None
        return EventFields(
            type(event),
            binascii.a2b_base64(payload),
            event.received_at,
            event.signer,
            superseded,
        )
    except Exception:
        return ERROR


# --- stored states ------------------------------------------------------------------------------

texts = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["2026-12-03T11:22:23.694Z", "sha256:" + "ab" * 32, "", "\u00b7", "\ud800x"]
)
json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | texts
payload_bytes = st.binary(max_size=40) | st.builds(
    lambda d: json.dumps(d).encode(), st.dictionaries(texts, json_scalars, max_size=3)
)


@st.composite
def payload_texts(draw: st.DrawFn) -> Any:
    raw = draw(payload_bytes)
    good = base64.b64encode(raw).decode()
    if draw(st.integers(0, 2)):
        return good
    return draw(
        st.sampled_from(
            [
                good.rstrip("="),  # unpadded
                good + "=",
                good[:-1] + ("A" if good[-1:] != "A" else "B"),  # other last character
                " " + good,
                good.replace("A", "-"),
                good + "\n",
                base64.urlsafe_b64encode(raw).decode(),
            ]
        )
        | json_scalars
    )


@st.composite
def stored_states(draw: st.DrawFn) -> tuple[str, bytes]:
    topic = draw(st.sampled_from(TOPICS[:8] * 3 + TOPICS))
    envelope: dict[str, Any] = {
        "payloadType": "application/vnd.in-toto+json",
        "payload": draw(payload_texts()),
        "signatures": [{"keyid": "k", "sig": "c2ln"}],
    }
    if not draw(st.integers(0, 9)):
        envelope = {"_type_": "datetime_iso", "_data_": "2026-12-03T11:22:23+00:00"}
    state: dict[str, Any] = {
        "timestamp": {"_type_": "datetime_iso", "_data_": "2026-12-03T11:22:23.694434+00:00"},
        "originator_topic": "ledger.aggregates:Run",
        "envelope": envelope,
        "envelope_digest": "sha256:" + "cd" * 32,
        "received_at": draw(texts if draw(st.integers(0, 4)) else json_scalars),
        "signer": draw(texts if draw(st.integers(0, 4)) else json_scalars),
    }
    if draw(st.integers(0, 3)):
        state["superseded_by"] = draw(
            texts | st.none() if draw(st.integers(0, 3)) else json_scalars
        )
    if not draw(st.integers(0, 5)):
        for key in draw(st.lists(st.sampled_from(["received_at", "signer", "envelope"]))):
            state.pop(key, None)
    if not draw(st.integers(0, 9)):
        state["received_at"] = {"_type_": "datetime_iso", "_data_": "2026-12-03T11:22:23+00:00"}
    transcoded = draw(
        st.sampled_from(
            ["as stored"] * 8
            + ["bad time", "other type", "typed elsewhere", "escaped", "no time", "three keys"]
        )
    )
    if transcoded == "bad time":  # the transcoder's datetime.fromisoformat refuses it
        state["timestamp"]["_data_"] = draw(st.sampled_from(["", "2026-13-01", "x", "1"]))
    elif transcoded == "other type":
        state["timestamp"]["_type_"] = draw(st.sampled_from(["uuid_hex", "decimal_str", "nope"]))
    elif transcoded == "typed elsewhere":  # another object the transcoder would decode
        where = draw(st.sampled_from(["top", "envelope", "signatures"]))
        typed = {"_type_": draw(st.sampled_from(["uuid_hex", "nope"])), "_data_": "zz"}
        if where == "top":
            state["extra"] = typed
        elif isinstance(state.get("envelope"), dict) and where == "envelope":
            state["envelope"]["extra"] = typed
        elif isinstance(state.get("envelope"), dict):
            state["envelope"]["signatures"] = [typed]
    elif transcoded == "no time":
        state.pop("timestamp")
    elif transcoded == "three keys":  # not the transcoder's: left as it is
        state["timestamp"]["x"] = 1
    text = json.dumps(state, ensure_ascii=not draw(st.integers(0, 4)))
    if transcoded == "escaped":
        text = text.replace('"_type_"', '"\\u005ftype_"', 1)
    data = text.encode("utf-8", "surrogatepass")
    mutation = draw(st.sampled_from(["none"] * 6 + ["duplicate", "byte", "truncate", "nan"]))
    if mutation == "duplicate":  # a second "payload" or "received_at" key (the last one wins)
        key = draw(st.sampled_from(['"payload":', '"received_at":', '"signer":']))
        data = data.replace(key.encode(), key.encode() + b'"QUJD","x":', 1)
    elif mutation == "byte" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    elif mutation == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif mutation == "nan":
        data = data.replace(b'"envelope_digest"', b'"n":NaN,"envelope_digest"', 1)
    return topic, data


@settings(max_examples=3000, deadline=None)
@given(stored_states())
def test_the_reader_answers_as_the_mapper_or_not_at_all(row: tuple[str, bytes]) -> None:
    topic, state = row
    fields = READER.read(topic, state)
    expected = mapper_fields(topic, state)
    if fields is None:
        event(
            "left to the mapper, " + ("which refuses it" if expected is ERROR else "which reads it")
        )
        return
    event("read")
    assert expected == fields
    try:
        expected: Any = stored_statement({"payload": base64.b64encode(fields.payload).decode()})
    except Exception as exc:
        expected = type(exc)
    try:
        got: Any = statement_of_payload(fields.payload)
    except Exception as exc:
        got = type(exc)
    assert got == expected


def extra_by(cls: type[Any]) -> bool:
    return cls is Run.Superseded


# Text as run events store it (no "_type_": a state naming it twice is left to the mapper).
printable = st.text(st.characters(codec="utf-8", min_codepoint=32), max_size=12).filter(
    lambda text: "_type_" not in text
)


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(RUN_CLASSES),
    st.binary(max_size=64),
    printable,
    printable,
    st.none() | printable,
)
@example(Run.Ingested, b"", "", "\\u", None)  # CI's draw: a backslash before a "u"
def test_well_formed_stored_events_are_read_as_the_mapper_reads_them(
    cls: type[Any], payload: bytes, received_at: str, signer: str, superseded_by: str | None
) -> None:
    """What the mapper writes, with any payload, times and signers (control characters and
    lone surrogates aside: JSON escapes them, and escapes are left to the mapper)."""
    fields: dict[str, Any] = {
        "envelope": {
            "payloadType": "x",
            "payload": base64.b64encode(payload).decode(),
            "signatures": [{"keyid": "k", "sig": "c2ln"}],
        },
        "envelope_digest": "sha256:" + "cd" * 32,
        "received_at": received_at,
        "signer": signer,
    }
    event = cls(
        originator_id=uuid.uuid4(),
        originator_version=1,
        timestamp=datetime.now(UTC),
        **fields,
        **(
            EXTRA.get(cls, {}) | ({"superseded_by": superseded_by} if cls is Run.Superseded else {})
        ),
    )
    stored = MAPPER.to_stored_event(event)
    read = READER.read(stored.topic, stored.state)
    if read is None:
        # Declined only where the text holds a backslash before a "u" (an escape, or an
        # escaped backslash): left to the mapper, as the docstring says; CI drew "\\u".
        assert b"\\u" in stored.state, stored.state
        return
    assert read == mapper_fields(stored.topic, stored.state)
    assert read.payload == payload


@pytest.mark.parametrize("cls", RUN_CLASSES)
def test_what_the_ledger_stores_is_read(cls: type[Any]) -> None:
    """Each run event class as the mapper stores it (non-ASCII fields included)."""
    statement = {"subject": [{"digest": {"sha256": "ab" * 32}}], "predicate": {"t": "é · ✓"}}
    payload = base64.b64encode(json.dumps(statement).encode()).decode()
    fields: dict[str, Any] = {
        "envelope": {"payloadType": "x", "payload": payload, "signatures": []},
        "envelope_digest": "sha256:" + "cd" * 32,
        "received_at": "2026-12-03T11:22:23.694Z",
        "signer": "sha256:" + "ef" * 32,
    }
    extra = EXTRA.get(cls, {})
    event = cls(
        originator_id=uuid.uuid4(),
        originator_version=1,
        timestamp=datetime.now(UTC),
        **fields,
        **extra,
    )
    stored = MAPPER.to_stored_event(event)
    read = READER.read(stored.topic, stored.state)
    assert read is not None
    assert read == mapper_fields(stored.topic, stored.state)
    assert statement_of_payload(read.payload) == stored_statement(fields["envelope"])


def test_the_key_book_and_unknown_topics_go_to_the_mapper() -> None:
    assert READER.read(topic_of("Principal.Registered"), b"{}") is None
    assert READER.read("no.such.module:Event", b"{}") is None
    assert Principal is not None


def test_a_mapper_with_a_cipher_or_compressor_is_left_to_itself() -> None:
    import zlib

    compressing = Mapper(MAPPER.transcoder, compressor=zlib)  # type: ignore[arg-type]
    reader = EventFieldReader(compressing, RUN_CLASSES, Run.Superseded)
    assert not reader.enabled
    assert reader.read(TOPICS[0], b'{"envelope":{"payload":""}}') is None
