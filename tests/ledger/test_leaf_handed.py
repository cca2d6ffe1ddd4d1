"""The commit's log leaves from the envelopes admission parsed (their JCS bytes, made for the
envelope's digest) are the ones re-canonicalising the stored envelope makes, byte for byte;
and those bytes are taken only for a stored envelope equal to a parsed one of plain types."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tests.ledger.test_lean_writes as lean
from domain.canonical import canonical_json
from ledger.proofs.log_entries import LogEntry
from ledger.signing.dsse import parse_envelope
from ledger.store.log_leaves import entry_data as _entry_data
from tests.ledger.test_fold_handed import _envelope, _parsed, set_roads, texts, values
from tests.ledger.test_lean_writes import START, two_db_urls  # noqa: F401 - its fixture

safe = st.integers(0, 2**53 - 1)


@settings(max_examples=300, deadline=None)
@given(safe, texts, safe, texts, st.dictionaries(texts, values, max_size=4), texts)
def test_data_given_the_envelopes_jcs_is_data(
    position: int, aggregate: str, version: int, topic: str, envelope: Any, received: str
) -> None:
    entry = LogEntry(position, aggregate, version, topic, envelope, received)
    assert entry.data_given(canonical_json(envelope)) == entry.data()


def _entry(envelope: Any) -> LogEntry:
    return LogEntry(7, "run-id", 2, "ledger.aggregates:Run.Ingested", envelope, "2026-12-07Z")


def _fails() -> bytes:
    raise AssertionError("canonicalised again although handed")


def test_the_parsed_envelopes_bytes_are_taken_for_an_equal_stored_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed = _envelope({"subject": [], "predicate": {"x": "ü€😀"}}, ascii_only=False)
    stored = json.loads(json.dumps(parsed.raw))  # decoded from the stored bytes: equal, not it
    expected = _entry(stored).data()
    assert parsed.made is None
    entry = _entry(stored)
    monkeypatch.setattr(entry.__class__, "data", lambda self: _fails())
    assert _entry_data(entry, parsed) == expected


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The positions of the entries whose data were made from handed envelope bytes."""
    taken: list[int] = []
    original = LogEntry.data_given

    def data_given(self: LogEntry, envelope: bytes) -> bytes:
        taken.append(self.position)
        return original(self, envelope)

    monkeypatch.setattr(LogEntry, "data_given", data_given)
    return taken


def test_any_other_stored_envelope_is_canonicalised_from_what_is_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed = _envelope({"subject": [], "predicate": None}, ascii_only=True)
    # Another signature stored than the one parsed: the stored one's bytes, not the parsed.
    other = json.loads(json.dumps(parsed.raw))
    other["signatures"][0]["keyid"] = "k2"
    assert (
        _entry_data(_entry(other), parsed)
        == _entry(other).data()
        != _entry_data(_entry(json.loads(json.dumps(parsed.raw))), parsed)
    )
    # A parsed envelope not of exact dicts (its JCS made when parsed): never taken, even equal.
    proxied = parse_envelope(MappingProxyType(dict(parsed.raw)))
    assert proxied.made is not None
    entry = _entry(json.loads(json.dumps(parsed.raw)))
    taken = _counting(monkeypatch)
    assert _entry_data(entry, proxied) == entry.data()
    assert _entry_data(entry, None) == entry.data()
    assert taken == []


# ``parsed``: the edge or the writer's wire parsed each envelope; ``raw``: one process sends
# the JSON values, which admission parses (``AdmittedGroup.parsed`` hands them on).
@pytest.mark.parametrize("sent_as", ["parsed", "raw"])
@pytest.mark.parametrize("split", ["one per commit", "groups of 32"])
def test_parsed_and_raw_envelopes_log_the_same_leaves(
    two_db_urls: tuple[str, str],
    seed_path: Path,
    split: str,
    sent_as: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys, root, envelopes = lean.signed_world(seed_path, "test.kernelindex/leafin")
    made = []
    given: list[int] = []
    for fast, url in zip((False, True), two_db_urls, strict=True):
        ledger = lean._open(url, root, keys["log"], orm=False)
        try:
            sent = [_parsed(e) for e in envelopes] if fast and sent_as == "parsed" else envelopes
            set_roads(monkeypatch, on=fast)
            if fast:
                given = _counting(monkeypatch)
            lean._append_all(ledger, lean.SPLITS[split](sent), orm=False)
            rows = lean._rows(ledger)
            made.append((rows["leaves"], rows["nodes"], rows["checkpoints"]))
        finally:
            ledger.close()
    assert made[0][0]
    assert made[1] == made[0]
    # Every event took its envelope's bytes from the parse.
    events = [leaf for leaf in made[1][0] if leaf[1] >= 0]
    assert sorted(given) == sorted(leaf[1] for leaf in events)
