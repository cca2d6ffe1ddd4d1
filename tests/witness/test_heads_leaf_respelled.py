"""An event filed under another spelling of its aggregate's UUID (review of issue 36).

``UUID()`` reads ``ABCD…`` (upper case), ``{…}``, ``urn:uuid:…`` and 32 bare hex digits as
the id the writer spells ``str(uuid)``, so an event line so spelled passes the filing check
(its statement's aggregate, compared as a UUID). The whole-log heads fold keys aggregates by
the entry's text, though: an operator that respells a run's last event can sign a heads leaf
that still shows the run one event short under its real key (the head a scoped bundle's map
proof is held to), and the whole-log recomputation agrees with it. The log writes one
spelling; a verifier reads only that one."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any
from uuid import UUID

import pytest

from ledger.verification_report import Check, Report
from ledger.verify import Outcome, outcome_of
from ledger.verify.events import parse_event
from ledger.verify.heads_map import read_heads_map
from tests.witness.test_heads_leaf import World, world  # noqa: F401 - the fixture
from tests.witness.test_heads_leaf_whole_log import (
    Records,
    _heads_before,
    _heads_leaves,
    _signed_again,
    _verify,
    _whole_log,
)

_SPELLINGS: dict[str, Callable[[UUID], str]] = {
    "upper": lambda u: str(u).upper(),
    "braces": lambda u: "{" + str(u) + "}",
    "urn": lambda u: u.urn,
    "hex": lambda u: u.hex,
}


def _respelled(records: Records, leaf: int, spell: Callable[[UUID], str]) -> Records:
    out = [dict(r) for r in records]
    for r in out:
        if r["type"] == "event" and r["leafIndex"] == leaf:
            r["aggregate"] = spell(UUID(r["aggregate"]))
    return out


@pytest.mark.parametrize("spelling", sorted(_SPELLINGS))
def test_an_event_respelled_under_another_aggregate_key_fails_the_whole_log(
    world: World, spelling: str
) -> None:
    """Each aggregate's last event before the last heads leaf, respelled, with every heads
    leaf made as the fold of the respelled events (the run's real key one event short) and
    the tree signed again by the log key: never VERIFIED, ``format`` naming the line."""
    records = _whole_log(world)
    stated = _heads_leaves(records)
    last: dict[str, int] = {}
    versions: dict[str, int] = {}
    for r in records:
        if r["type"] == "event" and r["leafIndex"] < max(stated):
            last[r["aggregate"]] = r["leafIndex"]
            versions[r["aggregate"]] = r["version"]
    respelled = [leaf for a, leaf in last.items() if versions[a] > 1]
    assert respelled  # the world has runs with more than one event
    for leaf in respelled:
        altered = _respelled(records, leaf, _SPELLINGS[spelling])
        roots = {i: _heads_before(altered, i) for i in stated}
        assert roots != stated  # the real key's head is one event short
        report = _verify(world, _signed_again(world, altered, roots))
        assert outcome_of(report) is Outcome.FAILED, (spelling, leaf)
        assert any(f.check == Check.FORMAT and "canonical" in f.reason for f in report.findings)


@pytest.mark.parametrize("spelling", sorted(_SPELLINGS))
def test_an_event_line_reads_only_the_writers_spelling_of_its_aggregate(spelling: str) -> None:
    aggregate = UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
    record: dict[str, Any] = {
        "type": "event",
        "leafIndex": 0,
        "position": 1,
        "aggregate": str(aggregate),
        "version": 1,
        "topic": "t",
        "envelope": {},
        "receivedAt": "2026-12-06T00:00:00.000Z",
        "proof": [],
    }
    report = Report(subject="event")
    parsed = parse_event("line 1", record, report)
    assert parsed is not None and parsed.aggregate == aggregate
    record["aggregate"] = _SPELLINGS[spelling](aggregate)
    assert parse_event("line 2", record, report) is None
    assert [(f.check, f.where) for f in report.findings] == [(Check.FORMAT, "line 2")]
    assert "canonical" in report.findings[0].reason


@pytest.mark.parametrize("delta", [-1, 1, 5])
def test_an_event_whose_version_skips_or_repeats_fails_the_whole_log(
    world: World, delta: int
) -> None:
    """The heads fold takes an event's version as its aggregate's count of events: a run's
    later event relabelled (version 1 again: the run shown one event short; 3 or 7: events
    it does not have), every heads leaf made as the fold of that and the tree signed again,
    is never VERIFIED: a whole-log bundle holds each aggregate's versions to 1, 2, 3 … in
    leaf order, as the event store writes them (``complete`` naming the line)."""
    records = _whole_log(world)
    stated = _heads_leaves(records)
    later = [r["leafIndex"] for r in records if r["type"] == "event" and r["version"] > 1]
    assert later
    for leaf in later:
        altered = [dict(r) for r in records]
        for r in altered:
            if r["type"] == "event" and r["leafIndex"] == leaf:
                r["version"] += delta
        roots = {i: _heads_before(altered, i) for i in stated}
        report = _verify(world, _signed_again(world, altered, roots))
        assert outcome_of(report) is Outcome.FAILED, (delta, leaf)
        assert {f.check for f in report.findings} == {Check.COMPLETE}  # and the next, if any
        if delta < 0:  # a version again: named at its line
            assert f"leaf {leaf} " in report.findings[0].where
        else:  # versions skipped: named at the end, when none of them came
            assert report.findings[-1].where == "end"
            assert "are not in the bundle" in report.findings[-1].reason


def _other_spelling(text: str) -> str:
    """The same 32 bytes with the spare bits of the last character set (``…A=`` -> ``…B=``):
    a lenient decoder reads both alike."""
    assert text.endswith("=") and not text.endswith("==")
    last = text[-2]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    return text[:-2] + alphabet[alphabet.index(last) ^ 1] + "="


def test_a_heads_leaf_or_map_root_in_another_base64_spelling_is_refused(world: World) -> None:
    """A bundle line has one spelling: a headsLeaf line whose root is respelled (same bytes,
    so the same leaf and the same map) fails ``format``, as every other hash of a bundle
    does; so does a headsMap line's."""
    records = _whole_log(world)
    index = min(_heads_leaves(records))
    altered = [dict(r) for r in records]
    for r in altered:
        if r["type"] == "headsLeaf" and r["leafIndex"] == index:
            r["root"] = _other_spelling(r["root"])
    report = _verify(world, altered)
    assert outcome_of(report) is Outcome.FAILED
    assert report.findings[0].check == Check.FORMAT  # then its leaf counts as left out
    assert "canonical" in report.findings[0].reason
    line = {"leafIndex": 3, "root": _other_spelling(base64.b64encode(bytes(32)).decode())}
    line |= {"proof": [], "runs": {}, "keys": {}, "groups": {}}
    refused = Report(subject="bundle")
    assert read_heads_map("line 9", line, refused) is None
    assert [f.check for f in refused.findings] == [Check.HEADS_MAP]
