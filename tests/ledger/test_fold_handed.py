"""The commit's fold fields from the payloads the writer parsed (``handed_payloads``) are the
ones decoding the stored envelope's payload again makes, byte for byte; and a handed payload
is taken only for the very text object it was decoded from."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

import ledger.application as application
import ledger.store.fold_fields as fold_fields
import tests.ledger.test_lean_writes as lean
from domain.errors import DomainError
from domain.statements import PAYLOAD_TYPE
from ledger.aggregates import Run
from ledger.application import Ledger
from ledger.signing.authoring import attestation_envelope
from ledger.signing.dsse import parse_envelope
from ledger.store import fold_manifests
from ledger.store.fold_fields import event_fold_fields, fields_of_event, handed_payloads, row_of
from tests.ledger.test_lean_writes import START, two_db_urls  # noqa: F401 - its fixture

texts = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]))
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)
manifest = st.dictionaries(texts, values, min_size=1, max_size=4).map(
    lambda d: {**d, "padding": "é" * 80}  # long enough to be shared
)


class _Ingested:
    """Stands in for a stored ingestion: its class's topic and the fields the row reads."""

    def __init__(self, envelope: dict[str, Any]) -> None:
        self.envelope = envelope
        self.received_at = "2026-12-07T10:00:00Z"
        self.signer = "ed25519:k"


_Ingested.__module__ = Run.Ingested.__module__
_Ingested.__qualname__ = Run.Ingested.__qualname__


def _envelope(statement: Any, ascii_only: bool) -> Any:
    text = json.dumps(statement, ensure_ascii=ascii_only).encode()
    sig = base64.b64encode(b"s" * 64).decode()
    raw = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(text).decode(),
        "signatures": [{"keyid": "k", "sig": sig}],
    }
    return parse_envelope(raw)


@settings(max_examples=60, deadline=None)
@given(texts, st.dictionaries(texts, manifest, max_size=3), values, st.booleans())
def test_the_handed_road_writes_the_decode_roads_rows(
    name: str, manifests: Any, extra: Any, ascii_only: bool
) -> None:
    statement = {
        "subject": [{"name": name, "digest": {"sha256": "ab" * 32}}],
        "predicate": {"manifests": manifests, "extra": extra, "x": 0.1, "n": "ü€😀"},
    }
    envelope = _envelope(statement, ascii_only)
    event = _Ingested(dict(envelope.raw))  # as ``admission_types._signed`` stores it
    decoded = fields_of_event(event)
    handed = fields_of_event(event, handed_payloads([envelope]))
    assert decoded is not None and handed == decoded
    assert row_of(handed) == row_of(decoded)


def test_a_handed_payload_is_taken_for_its_own_text_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    statement = {"subject": [{"digest": {"sha256": "cd" * 32}}], "predicate": {"a": 1.5}}
    envelope = _envelope(statement, ascii_only=False)
    event = _Ingested(dict(envelope.raw))
    expected = fields_of_event(event)
    handed = handed_payloads([envelope])
    lying = {
        key: (text, b'{"subject":[{"digest":{"sha256":"00"}}]}')
        for key, (text, _) in handed.items()
    }
    # The very text object: taken (the decoder is not called).
    monkeypatch.setattr(fold_fields, "stored_payload", _no_decode)
    assert fields_of_event(event, lying) is not None
    assert fields_of_event(event, lying) != expected
    monkeypatch.undo()
    # An equal text that is another object (an envelope not made from the parsed one): decoded.
    event.envelope = {**event.envelope, "payload": "".join(list(event.envelope["payload"]))}
    assert event.envelope["payload"] is not envelope.raw["payload"]
    assert fields_of_event(event, lying) == expected


def _no_decode(text: object) -> bytes:
    raise AssertionError("decoded although handed")


def test_only_parsed_envelopes_are_handed() -> None:
    envelope = _envelope({"subject": [], "predicate": None}, ascii_only=True)
    assert handed_payloads([dict(envelope.raw), None, "x"]) == {}
    assert list(handed_payloads([envelope]).values()) == [
        (envelope.raw["payload"], envelope.payload)
    ]
    assert msgspec.json.decode(envelope.payload) == {"subject": [], "predicate": None}


def _parsed(envelope: object) -> object:
    """The envelope as the edge (or the writer's wire) hands it parsed, where it parses."""
    try:
        return parse_envelope(envelope)
    except DomainError:
        return envelope


def _fold_rows(ledger: Ledger) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    with ledger.store.transaction(commit=False) as session:
        f, m = event_fold_fields, fold_manifests.fold_manifests
        return (
            [(p, bytes(v)) for p, v in session.execute(select(f).order_by(f.c.position))],
            sorted(tuple(bytes(v) for v in r) for r in session.execute(select(m))),
        )


_ROADS = (application.handed_payloads, application.parsed_at)


def set_roads(monkeypatch: pytest.MonkeyPatch, *, on: bool) -> None:
    """Off: the commit hands nothing on, every payload is decoded and every leaf
    canonicalised from the stored envelope (the reference roads)."""
    handed, parsed_at = _ROADS if on else (lambda _: {}, lambda *_: {})
    monkeypatch.setattr(application, "handed_payloads", handed)
    monkeypatch.setattr(application, "parsed_at", parsed_at)


# ``parsed``: the edge or the writer's wire parsed each envelope; ``raw``: one process sends
# the JSON values, which admission parses (``AdmittedGroup.parsed`` hands them on).
@pytest.mark.parametrize("sent_as", ["parsed", "raw"])
@pytest.mark.parametrize("split", ["one per commit", "groups of 32"])
def test_parsed_and_raw_envelopes_write_the_same_fold_rows(
    two_db_urls: tuple[str, str],
    seed_path: Path,
    split: str,
    sent_as: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys, root, envelopes = lean.signed_world(seed_path, "test.kernelindex/foldin")
    # Non-ASCII text and floats in what the rows carry.
    envelopes += [
        attestation_envelope(
            *_subject(envelopes[5]), keys["attester"], type_="note", body=f"ü€😀 {x!r}", now=START
        )
        for x in (0.1, 1e300, -2.5e-7)
    ]
    made = []
    for fast, url in zip((False, True), two_db_urls, strict=True):
        ledger = lean._open(url, root, keys["log"], orm=False)
        try:
            sent = [_parsed(e) for e in envelopes] if fast and sent_as == "parsed" else envelopes
            set_roads(monkeypatch, on=fast)
            if fast:  # every stored payload is one handed: none is decoded again
                monkeypatch.setattr(fold_fields, "stored_payload", _no_decode)
            lean._append_all(ledger, lean.SPLITS[split](sent), orm=False)
            made.append(_fold_rows(ledger))
        finally:
            ledger.close()
    assert made[0][0] and made[0][1]
    assert made[1] == made[0]


def _subject(envelope: Any) -> tuple[str, str]:
    statement = json.loads(base64.b64decode(envelope["payload"]))
    subject = statement["subject"][0]
    return f"sha256:{subject['digest']['sha256']}", subject["name"]
