"""The registry over the demo ledger, per backend: GPUs and implementations (by author) with
their runs and #1 records (API and pages), and the records timeline (GET /v1/records, the
/records page, the Atom feed), dated by the source's date of each record's run."""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree as ET

from served_app import Served
from test_records_feed import FEED, SEED_GROUP_FIRST, A, entries, seed_group, text

from api.demo import COHORT_FILE, _data
from ledger.signing.authoring import ingestion_envelope

B200 = "NVIDIA B200"


def post_dated(served: Served, name: str, mean_ns: int, observed: str, author: str) -> str:
    """A run in the seed's group with its own mean, source date and author."""
    cohort = _data(COHORT_FILE)["cohort"]
    template = next(m for m in cohort if m["run"]["metadata"]["name"] == SEED_GROUP_FIRST)
    manifests = copy.deepcopy(template)
    manifests["run"]["metadata"]["name"] = name
    manifests["run"]["spec"]["timing"]["latencyNs"]["mean"] = mean_ns
    manifests["run"]["spec"]["observedAt"] = observed
    manifests["implementation"]["metadata"]["authors"] = [{"name": author}]
    reply = served.client.post(
        "/v1/runs", json=ingestion_envelope(manifests, served.home.key("ingester"))
    )
    assert reply.status_code == 201, reply.text
    return str(reply.json()["subjectDigest"])


def every_run(served: Served, **query: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {**query, "limit": 200}
    while True:
        page = served.client.get("/v1/runs", params=params).json()
        items += page["items"]
        if page["next"] is None:
            return items
        params["cursor"] = page["next"]


def timeline(served: Served, **query: Any) -> list[dict[str, Any]]:
    """Every record of the timeline, following ``next`` one record a page."""
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {**query, "limit": 1}
    while True:
        reply = served.client.get("/v1/records", params=params)
        assert reply.status_code == 200, reply.text
        page = reply.json()
        items += page["items"]
        if page["next"] is None:
            return items
        params["before"] = page["next"]


def test_the_gpu_list_counts_each_gpus_runs_and_records(served: Served) -> None:
    gpus = served.client.get("/v1/gpus").json()
    runs = every_run(served)
    assert {g["name"]: g["runs"] for g in gpus} == {
        gpu: sum(r["gpu"] == gpu for r in runs) for gpu in {r["gpu"] for r in runs if r["gpu"]}
    }
    b200 = next(g for g in gpus if g["name"] == B200)
    records = served.client.get("/v1/records").json()["items"]
    assert b200["records"] == sum(r["gpu"] == B200 for r in records) == 2
    assert b200["holds"] == 2  # both demo groups' #1 run on it
    page = served.client.get("/gpus")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert f'href="/gpus/{quote(B200)}"' in page.text


def test_a_gpu_page_lists_its_runs_a_page_at_a_time_and_its_records(served: Served) -> None:
    path = f"/v1/gpus/{quote(B200)}"
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 1}
    while True:
        page = served.client.get(path, params=params).json()
        assert page["kind"] == "gpu" and page["name"] == B200
        seen += [r["digest"] for r in page["runs"]]
        if page["runsNext"] is None:
            break
        params["cursor"] = page["runsNext"]
    assert seen == [r["digest"] for r in every_run(served, gpu=B200)]
    assert len(seen) == page["summary"]["runs"] == 4
    records = served.client.get(path).json()["records"]["items"]
    assert [r["run"] for r in records] == [r["run"] for r in timeline(served, gpu=B200)]
    html = served.client.get(f"/gpus/{quote(B200)}")
    assert html.status_code == 200
    assert f"<h1>{B200}</h1>" in html.text and SEED_GROUP_FIRST in html.text


def test_an_implementation_page_lists_its_authors_runs(served: Served) -> None:
    listed = served.client.get("/v1/implementations").json()
    names = {a["name"]: a["runs"] for a in listed["items"]}
    assert names["Proud Wren @ NVIDIA"] == 1 and listed["total"] == len(names)
    mine = post_dated(served, "demo-mine", 1_600_000, "2026-08-24T00:00:00.000Z", "A / B & C")
    page = served.client.get(f"/v1/implementations/{quote('A / B & C')}").json()
    assert page["kind"] == "implementation" and [r["digest"] for r in page["runs"]] == [mine]
    assert page["records"]["items"] == []  # slower than the #1: no record
    html = served.client.get(f"/implementations/{quote('A / B & C')}")
    assert html.status_code == 200 and "demo-mine" in html.text and "A / B &amp; C" in html.text
    listing = served.client.get("/implementations").text
    assert 'href="/implementations/A%20/%20B%20%26%20C"' in listing


def test_unknown_names_are_404_and_bad_queries_400_changing_nothing(served: Served) -> None:
    c = served.client
    for path in ("/v1/gpus/NVIDIA%20B201", "/v1/implementations/nobody"):
        reply = c.get(path)
        assert reply.status_code == 404
        assert reply.headers["content-type"].startswith("application/problem+json")
        assert reply.json()["code"] == "not-found"
    # Names are exact, as stored: another case is another name (matching is the matcher's).
    assert c.get("/v1/gpus/nvidia%20b200").status_code == 404
    for path in ("/gpus/NVIDIA%20B201", "/implementations/nobody"):
        page = c.get(path)
        assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert c.get("/v1/records", params={"before": 0}).status_code == 400
    assert c.get("/v1/records", params={"limit": 101}).status_code == 400
    assert c.get(f"/v1/gpus/{quote(B200)}", params={"cursor": "nope"}).status_code == 404
    assert c.get("/v1/records", params={"group": "sha256:" + "0" * 64}).status_code == 404
    # A name no text column can hold (NUL) is malformed, refused before any query, on
    # PostgreSQL too (api/server/request_text.py; every route: test_control_characters.py).
    for bad in ("/v1/gpus/a%00b", "/v1/implementations/a%00b", "/v1/records?gpu=a%00b"):
        assert c.get(bad).json()["code"] == "malformed-request"


def test_the_timeline_is_newest_first_dated_by_the_source_and_the_feed_agrees(
    served: Served,
) -> None:
    faster = post_dated(served, "demo-faster", 1_400_000, "2026-08-25T10:00:00Z", "x")
    items = timeline(served)
    assert [(r["at"], r["position"]) for r in items] == sorted(
        ((r["at"], r["position"]) for r in items), reverse=True
    )
    newest = items[0]
    assert newest["run"] == faster and newest["previousName"] == SEED_GROUP_FIRST
    assert (newest["at"], newest["dated"]) == ("2026-08-25T10:00:00.000Z", "observed")
    assert newest["admittedAt"] != newest["at"] and newest["holds"] is True
    feed = ET.fromstring(served.client.get(FEED).content)
    assert [text(e, "updated") for e in entries(feed)] == [r["at"] for r in items]
    assert text(feed, "updated") == newest["at"]
    assert [text(e, "id").rsplit(":", 1)[1] for e in entries(feed)] == [
        r["run"].split(":")[1] for r in items
    ]
    page = served.client.get("/records")
    assert page.status_code == 200 and "demo-faster" in page.text
    assert '<time datetime="2026-08-25T10:00:00.000Z">' in page.text


def test_a_run_its_source_dates_earlier_takes_its_place_in_the_history(served: Served) -> None:
    """Imported late but measured first: the history is the source's, not the import's."""
    key = seed_group(served)
    before = timeline(served, group=key)
    assert [r["name"] for r in before] == [SEED_GROUP_FIRST]
    early = post_dated(served, "demo-early", 1_450_000, "2026-01-02T03:04:05.678Z", "y")
    after = timeline(served, group=key)
    # It was #1 from January; the cohort's runs, measured later and slower, never beat it.
    assert [(r["run"], r["previousRun"]) for r in after] == [(early, None)]
    assert after[0]["at"] == "2026-01-02T03:04:05.678Z" and after[0]["holds"] is True
    board = served.client.get(f"/v1/leaderboards/{key}").json()["entries"]
    assert board[0]["run"] == early


def test_the_openapi_document_describes_the_registry_replies(served: Served) -> None:
    document = served.client.get("/schema/openapi.json").json()
    paths = document["paths"]
    for path, model in (
        ("/v1/gpus/{name}", "RegistryPage"),
        ("/v1/implementations", "ImplementationList"),
        ("/v1/implementations/{name}", "RegistryPage"),
        ("/v1/records", "RecordTimeline"),
    ):
        ok = paths[path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok["$ref"].endswith(model), path
    listed = paths["/v1/gpus"]["get"]["responses"]["200"]["content"]["application/json"]
    assert listed["schema"]["items"]["$ref"].endswith("RegistrySummary")
    event = document["components"]["schemas"]["RecordEvent"]["properties"]
    assert event["dated"]["enum"] == ["observed", "admitted"]
    assert "404" in paths["/v1/gpus/{name}"]["get"]["responses"]


def test_a_feed_of_one_group_links_its_records_page(served: Served) -> None:
    key = seed_group(served)
    feed = ET.fromstring(served.client.get(FEED, params={"group": key}).content)
    links = {link.get("rel"): link.get("href") for link in feed.findall(f"{A}link")}
    assert links["alternate"] == f"/records?group={quote(key)}"
    page = served.client.get(links["alternate"] or "")
    assert page.status_code == 200 and SEED_GROUP_FIRST in page.text
