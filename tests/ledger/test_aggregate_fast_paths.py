"""Admission's own roads to what eventsourcing's general ones make (``ledger.aggregates``,
``ledger.admission_types``): the same event, field for field and in the same order, the same
stored bytes, the same aggregate. The stored events are hashed into log leaves and read by
verifiers, so "the same" means byte for byte."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from eventsourcing.application import Application
from eventsourcing.persistence import Mapper
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.timestamps import format_time
from ledger.admission_types import _signed, received_text
from ledger.aggregates import Run, Signed, run_id
from ledger.signing.dsse import parse_envelope

TIMESTAMP = datetime(2026, 12, 7, 9, 30, 1, 234_567, tzinfo=UTC)


def _mapper() -> Mapper[Any]:
    """A mapper made as the writer's is (``Ledger``: the lean transcoder)."""
    app: Application[Any] = Application(
        env={
            "PERSISTENCE_MODULE": "eventsourcing.popo",
            "TRANSCODER_TOPIC": "ledger.store.lean_transcoder:LeanJSONTranscoder",
        }
    )
    return app.mapper


MAPPER = _mapper()

texts = st.text(max_size=40)


def _envelope(payload: bytes, keyid: str) -> dict[str, Any]:
    return {
        "payloadType": "application/vnd.in-toto+json",
        "payload": base64.b64encode(payload).decode(),
        "signatures": [{"keyid": keyid, "sig": "c2ln"}],
    }


def _general(signed: Signed, run_digest: str, run_name: str) -> Run:
    """eventsourcing's road: what ``Run.ingest`` was before it took its own."""
    return Run._create(
        Run.Ingested,
        id=run_id(run_digest),
        **signed.fields(),
        run_digest=run_digest,
        run_name=run_name,
    )


@settings(max_examples=60, deadline=None)
@given(payload=st.binary(max_size=200), keyid=texts, digest=texts, name=texts, signer=texts)
def test_ingest_makes_what_create_makes(
    payload: bytes, keyid: str, digest: str, name: str, signer: str
) -> None:
    signed = Signed(_envelope(payload, keyid), "sha256:" + "ab" * 32, "2026-12-07T09:30Z", signer)
    with pytest.MonkeyPatch.context() as patch:  # both roads ask the event class for it
        patch.setattr(Run.Ingested, "create_timestamp", staticmethod(lambda: TIMESTAMP))
        fast = Run.ingest(signed, run_digest=digest, run_name=name)
        general = _general(signed, digest, name)
    assert type(fast) is type(general) is Run
    [event], [expected] = fast.pending_events, general.pending_events
    assert type(event) is type(expected) is Run.Ingested
    assert list(vars(event).items()) == list(vars(expected).items())  # the order is stored
    assert fast.__dict__.keys() == general.__dict__.keys()
    assert fast == general  # every attribute, the pending event included
    stored, reference = MAPPER.to_stored_event(event), MAPPER.to_stored_event(expected)
    assert stored == reference


def test_a_replayed_ingestion_is_the_run_ingest_made() -> None:
    """Read back as the ledger reads a stored run (the mapper, then ``mutate``)."""
    signed = Signed(_envelope(b"{}", "k"), "sha256:" + "cd" * 32, "2026-12-07T09:30:00.000Z", "k")
    run = Run.ingest(signed, run_digest="sha256:" + "ef" * 32, run_name="r")
    [event] = run.collect_events()
    decoded = MAPPER.to_domain_event(MAPPER.to_stored_event(event))
    assert isinstance(decoded, Run.Ingested)
    replayed = decoded.mutate(None)
    assert isinstance(replayed, Run)
    assert replayed == run
    assert replayed.version == run.version == 1
    assert replayed.envelopes == run.envelopes


moments = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
) | st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([timezone(timedelta(hours=5)), timezone(timedelta(hours=-3))]),
)


@given(first=moments, second=moments)
def test_received_text_is_format_time(first: datetime, second: datetime) -> None:
    """The remembered text of a time is the text of that time, whatever came before."""
    for moment in (first, second, first, second, second):
        assert received_text(moment) == format_time(moment)


def test_signed_records_the_envelope_as_received() -> None:
    raw = _envelope(b'{"a": 1}', "k")
    envelope = parse_envelope(raw)
    signed = _signed(envelope, TIMESTAMP, "k")
    assert signed == Signed(dict(raw), envelope.digest, format_time(TIMESTAMP), "k")
    assert signed.envelope == raw and signed.envelope is not raw  # a copy: stored as received
