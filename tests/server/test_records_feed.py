"""GET /feeds/records.atom: an Atom feed of new #1 records as they happened, per backend.

Over the demo ledger (three runs of the seed's group, one of a lookalike group), with runs
posted that beat, tie or trail the #1, a hostile title, a retraction and a rebuild.
"""

from __future__ import annotations

import copy
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from litestar.testing import TestClient
from served_app import TEST_CONFIG, Served
from test_read_cost import Calls

import api.service.records as records_service
from api.demo import COHORT_FILE, _data
from api.server.app import create_app
from api.server.pages.feeds import NEVER, records_feed
from api.server.read_cache import ReadCache
from api.service.models.registry import RecordTimeline
from ledger.signing.authoring import ingestion_envelope, lifecycle_envelope

A = "{http://www.w3.org/2005/Atom}"
FEED = "/feeds/records.atom"
SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SEED_GROUP_FIRST = "sol-submission-21613"  # 1.499 ms, the first of the seed's group
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)> & "quotes" ]]>'


def feed_of(served: Served, params: dict[str, Any] | None = None) -> ET.Element:
    reply = served.client.get(FEED, params=params)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("application/atom+xml")
    root = ET.fromstring(reply.content)  # well-formed, so every text was escaped
    assert root.tag == f"{A}feed"
    return root


def entries(feed: ET.Element) -> list[ET.Element]:
    return feed.findall(f"{A}entry")


def text(element: ET.Element, tag: str) -> str:
    found = element.findtext(f"{A}{tag}")
    assert found is not None, tag
    return found


def post_run(served: Served, name: str, mean_ns: int, title: str | None = None) -> str:
    """A run in the seed's group with its own mean: 21613's manifests (workload included,
    as a post must carry it to be grouped), renamed."""
    cohort = _data(COHORT_FILE)["cohort"]
    template = next(m for m in cohort if m["run"]["metadata"]["name"] == SEED_GROUP_FIRST)
    manifests = copy.deepcopy(template)
    run = manifests["run"]
    run["metadata"]["name"] = name
    if title is not None:
        run["metadata"]["title"] = title
    run["spec"]["timing"]["latencyNs"]["mean"] = mean_ns
    run["spec"]["observedAt"] = f"2026-08-23T00:00:{mean_ns % 60:02d}.000Z"  # own digest
    reply = served.client.post(
        "/v1/runs", json=ingestion_envelope(manifests, served.home.key("ingester"))
    )
    assert reply.status_code == 201, reply.text
    return str(reply.json()["subjectDigest"])


def seed_group(served: Served) -> str:
    record = served.client.get(f"/v1/runs/{SEED}").json()
    return str(record["comparisonKey"])


def check_atom(feed: ET.Element) -> None:
    """RFC 4287's required elements, and entries newest first."""
    for tag in ("id", "title", "updated"):
        assert text(feed, tag)
    assert text(feed.find(f"{A}author"), "name")  # type: ignore[arg-type]
    assert [link.get("rel") for link in feed.findall(f"{A}link")].count("self") == 1
    ids = []
    for entry in entries(feed):
        for tag in ("id", "title", "updated", "summary"):
            assert text(entry, tag)
        link = entry.find(f"{A}link")
        assert link is not None and link.get("rel") == "alternate"
        assert "/runs/sha256:" in link.get("href", "")
        assert text(entry, "id").startswith("urn:kernelindex:record:sha256:")
        ids.append(text(entry, "id"))
    assert len(set(ids)) == len(ids)
    updated = [text(e, "updated") for e in entries(feed)]
    assert updated == sorted(updated, reverse=True)
    if updated:
        assert text(feed, "updated") == updated[0]


def test_the_demo_feed_holds_each_groups_first_record(served: Served) -> None:
    feed = feed_of(served)
    check_atom(feed)
    assert text(feed, "id") == "urn:kernelindex:feed:records"
    found = entries(feed)
    assert len(found) == 2  # two groups, each with one record so far
    assert all("the group's first ranked run" in text(e, "title") for e in found)
    # The two groups share operation and GPU: titles tell them apart by their stack.
    assert {text(e, "title").split(": ")[0][-4:] for e in found} == {"v1.0", "v1.1"}
    key = seed_group(served)
    ours = [e for e in found if key in text(e, "id")]
    assert len(ours) == 1 and SEED_GROUP_FIRST in text(ours[0], "title")
    board = served.client.get(f"/v1/leaderboards/{key}").json()["entries"]
    assert text(ours[0], "id") == f"urn:kernelindex:record:{key}:{board[0]['run']}"


def test_a_run_that_beats_the_first_is_a_new_entry_and_others_are_not(served: Served) -> None:
    key = seed_group(served)
    before = [text(e, "id") for e in entries(feed_of(served))]
    post_run(served, "demo-slower", 1_600_000)
    post_run(served, "demo-tie", 1_499_085)  # equals the #1: a tie takes nothing
    assert [text(e, "id") for e in entries(feed_of(served))] == before

    faster = post_run(served, "demo-faster", 1_400_000, title=HOSTILE)
    feed = feed_of(served)
    check_atom(feed)
    newest = entries(feed)[0]
    assert text(newest, "id") == f"urn:kernelindex:record:{key}:{faster}"
    title = text(newest, "title")
    assert title.startswith("New #1 in 056_language_model_decoder_prenorm_attention")
    assert title.endswith(f": demo-faster, 1.400 ms, beats {SEED_GROUP_FIRST} by 1.071×")
    assert newest.find(f"{A}link").get("href") == f"/runs/{faster}"  # type: ignore[union-attr]
    assert text(newest, "summary").startswith(HOSTILE + ": mean latency 1.400 ms")
    # Dated by the source's date of the run (its observedAt), not by when it was posted.
    assert text(newest, "updated") == "2026-08-23T00:00:20.000Z"
    assert "the source's date of the run" in text(newest, "summary")
    assert [text(e, "id") for e in entries(feed)][1:] == before  # older entries unchanged

    raw = served.client.get(FEED).text
    assert "<script" not in raw and "<img" not in raw and "&lt;script&gt;" in raw


def test_the_feed_is_rebuilt_identically(served: Served) -> None:
    post_run(served, "demo-faster", 1_400_000, title=HOSTILE)
    first = served.client.get(FEED).content
    served.app.state.read_cache = ReadCache(0)  # each read computed from the views
    assert served.client.get(FEED).content == first
    served.app.state.service.views.runner.rebuild()
    assert served.client.get(FEED).content == first


def test_the_feed_is_computed_once_per_position_and_a_write_makes_a_new_one(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    computed = Calls(records_service.record_entries)
    monkeypatch.setattr(records_service, "record_entries", computed)
    first = served.client.get(FEED)
    assert first.status_code == 200
    for _ in range(3):
        again = served.client.get(FEED)
        assert again.content == first.content
        assert again.headers["content-type"] == first.headers["content-type"]
        assert again.headers["cache-control"] == "public, max-age=300"
    assert computed.count == 1
    post_run(served, "demo-faster", 1_400_000)  # a new #1: a new position, a new answer
    newest = entries(feed_of(served))[0]
    assert "demo-faster" in text(newest, "title")
    assert computed.count == 2
    feed_of(served)
    assert computed.count == 2


def test_a_retracted_record_stays_in_the_history_marked(served: Served) -> None:
    key = seed_group(served)
    faster = post_run(served, "demo-faster", 1_400_000)
    admin = served.home.key("admin")
    retract = lifecycle_envelope(faster, "demo-faster", admin, action="retract", reason="dup")
    assert served.client.post(f"/v1/runs/{faster}/lifecycle", json=retract).status_code == 201
    board = served.client.get(f"/v1/leaderboards/{key}").json()["entries"]
    assert faster not in [e["run"] for e in board]  # off the current board ...
    newest = entries(feed_of(served))[0]
    assert faster in text(newest, "id")  # ... but it did take #1 when it arrived
    assert text(newest, "title").endswith("(since retracted)")
    assert [c.get("term") for c in newest.findall(f"{A}category")] == ["retracted"]
    assert "retracted since" in text(newest, "summary")


def test_the_group_filter_gives_one_groups_feed(served: Served) -> None:
    key = seed_group(served)
    post_run(served, "demo-faster", 1_400_000)
    feed = feed_of(served, {"group": key[:12]})  # a unique prefix, as leaderboards take
    check_atom(feed)
    assert text(feed, "id") == f"urn:kernelindex:feed:records:{key}"
    found = entries(feed)
    assert len(found) == 2 and all(key in text(e, "id") for e in found)
    assert [text(e, "title").split(": ")[1].split(",")[0] for e in found] == [
        "demo-faster",
        SEED_GROUP_FIRST,
    ]
    self_link = [link for link in feed.findall(f"{A}link") if link.get("rel") == "self"]
    assert self_link[0].get("href", "").endswith(f"?group={key.replace(':', '%3A')}")


def test_pages_of_the_feed_follow_rfc5005_next_links(served: Served) -> None:
    post_run(served, "demo-faster", 1_400_000)
    feed = feed_of(served)
    whole, updated = [text(e, "id") for e in entries(feed)], text(feed, "updated")
    assert len(whole) == 3
    seen: list[str] = []
    params: dict[str, Any] | None = {"limit": 1}
    while params is not None:
        feed = feed_of(served, params)
        assert text(feed, "updated") == updated  # the feed's newest, on every page
        seen += [text(e, "id") for e in entries(feed)]
        nxt = [
            link.get("href", "") for link in feed.findall(f"{A}link") if link.get("rel") == "next"
        ]
        params = None
        if nxt:
            query = nxt[0].split("?", 1)[1]
            params = dict(part.split("=", 1) for part in query.split("&"))
    assert seen == whole


def test_text_xml_cannot_carry_is_replaced_not_served_broken(served: Served) -> None:
    post_run(served, "demo-control", 1_300_000, title="bad \x01 title\x0b")
    newest = entries(feed_of(served))[0]
    assert text(newest, "summary").startswith("bad \ufffd title\ufffd: ")


def test_bad_group_keys_and_limits_are_refused_as_elsewhere(served: Served) -> None:
    c = served.client
    for group, status, code in [
        ("not-a-key", 404, "not-found"),
        ("sha256:" + "0" * 64, 404, "not-found"),
        ("sha256:" + "a" * 65, 400, "malformed-request"),
    ]:
        reply = c.get(FEED, params={"group": group})
        assert reply.status_code == status, (group, reply.text)
        assert reply.headers["content-type"].startswith("application/problem+json")
        assert reply.json()["code"] == code
        # The leaderboard answers the same reference the same way.
        assert c.get(f"/v1/leaderboards/{group}").status_code == status
    for limit in (0, 101):
        assert c.get(FEED, params={"limit": limit}).status_code == 400
    assert c.get(FEED, params={"before": 0}).status_code == 400


def test_an_empty_feed_is_still_valid_atom_with_a_fixed_updated() -> None:
    empty = RecordTimeline(comparison_key=None, group=None, newest=None, items=[], next=None)
    feed = ET.fromstring(records_feed("", empty))
    check_atom(feed)
    assert text(feed, "updated") == NEVER and entries(feed) == []


def test_a_write_through_one_worker_is_in_the_next_answer_of_another(served: Served) -> None:
    """``serve --workers N``: each worker keeps its own answers, keyed by the views position
    read from the shared database, so another worker's write is in this one's next answer."""
    ledger = served.home.open()
    try:
        with TestClient(create_app(ledger, TEST_CONFIG)) as worker:
            before = worker.get(FEED).content
            assert worker.get(FEED).content == before
            post_run(served, "demo-faster", 1_400_000)  # through the other worker
            newest = entries(ET.fromstring(worker.get(FEED).content))[0]
            assert "demo-faster" in text(newest, "title")
    finally:
        ledger.close()
