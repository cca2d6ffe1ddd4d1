"""The server-rendered pages over the demo ledger: content, links, escaping, errors, markup.

Also the pure parts they are built from: the SVG chart and the number formatting.
"""

from __future__ import annotations

import html
import itertools
import math
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from served_app import RUN_PAGE_SECTIONS, Served

from api.demo import seed_manifests
from api.server.pages.chart import LABEL_WIDTH, VALUE_WIDTH, WIDTH, Bar, bar_chart
from api.server.pages.controller import template_config
from api.server.pages.format import (
    LEVEL_COLOURS,
    format_ns,
    format_number,
    format_ratio,
    format_value,
    safe_url,
    short_digest,
)
from api.service.models import to_response
from api.service.models.history import RunHistory
from api.service.models.runs import RunRecord
from domain.evidence import EvidenceLevel
from domain.statements import Role
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
    lifecycle_envelope,
)
from ledger.signing.keys import SigningKey

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SEED_NAME = "sol-submission-38823"
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)> & "quotes"'
VAGUE_LINK_TEXT = {"here", "click here", "link", "more", "read more"}


class Page(HTMLParser):
    """What the tests read from a page: links, headings, table headers, sections, text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[dict[str, Any]] = []
        self.headings: list[tuple[int, str]] = []
        self.th: list[dict[str, str | None]] = []
        self.counts: dict[str, int] = {}
        self.first: dict[str, dict[str, str | None]] = {}
        self.pre: list[str] = []
        self._open: list[tuple[str, dict[str, Any]]] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.counts[tag] = self.counts.get(tag, 0) + 1
        self.first.setdefault(tag, attributes)
        if tag == "th":
            self.th.append(attributes)
        if tag in ("a", "h1", "h2", "h3", "h4", "pre"):
            self._open.append((tag, {"attrs": attributes, "text": []}))

    def handle_endtag(self, tag: str) -> None:
        if not self._open or self._open[-1][0] != tag:
            return
        _, item = self._open.pop()
        text = " ".join("".join(item["text"]).split())
        if tag == "a":
            self.links.append(item["attrs"] | {"text": text})
        elif tag == "pre":
            self.pre.append("".join(item["text"]))
        else:
            self.headings.append((int(tag[1]), text))

    def handle_data(self, data: str) -> None:
        for _, item in self._open:
            item["text"].append(data)

    def links_of(self, css_class: str) -> list[dict[str, Any]]:
        return [a for a in self.links if css_class in (a.get("class") or "").split()]

    def json_link(self) -> str:
        found = [a for a in self.links_of("json-link") if a.get("rel") == "alternate"]
        assert len(found) == 1 and found[0].get("type") == "application/json"
        return str(found[0]["href"])


def get_page(served: Served, path: str, status: int = 200) -> tuple[str, Page]:
    response = served.client.get(path)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("text/html")
    return response.text, Page(response.text)


def check_markup(text: str, page: Page) -> None:
    """The accessibility basics every page keeps (DESIGN.md §10: pages people can use)."""
    assert text.startswith("<!doctype html>")
    assert page.first["html"].get("lang") == "en"
    assert page.counts.get("main") == 1
    assert text.count("<title>", 0, text.index("</head>")) == 1
    levels = [level for level, _ in page.headings]
    assert levels and levels[0] == 1 and levels.count(1) == 1
    for before, after in itertools.pairwise(levels):
        assert after <= before + 1, f"heading levels skip: {page.headings}"
    assert all(text for _, text in page.headings)
    for th in page.th:
        assert th.get("scope") in ("col", "row"), th
    for link in page.links:
        assert link["text"] and link["text"].lower() not in VAGUE_LINK_TEXT, link
        assert link.get("href")
    if "<svg" in text:
        svg = page.first["svg"]
        assert svg.get("role") == "img"
        for ident in (svg.get("aria-labelledby") or "").split():
            assert f'id="{ident}"' in text


def follow_json(served: Served, href: str) -> Any:
    response = served.client.get(href)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


# -------------------------------------------------------------------------------- pages


def test_index_shows_sources_groups_recent_runs_and_the_log(served: Served) -> None:
    text, page = get_page(served, "/")
    check_markup(text, page)
    assert follow_json(served, page.json_link()) == follow_json(served, "/v1/groups")

    runs = follow_json(served, "/v1/runs?limit=200")["items"]
    assert '<th scope="row">sol-execbench</th><td class="num">4</td>' in text
    # Recent runs: newest ingested first, each linked to its page.
    recent = [a["href"] for a in page.links_of("run-link")]
    assert recent == [f"/runs/{r['digest']}" for r in reversed(runs)]
    # Every comparison group links to its leaderboard.
    groups = follow_json(served, "/v1/groups")
    boards = [a["href"] for a in page.links_of("leaderboard-link")]
    assert boards == [f"/leaderboards/{g['comparisonKey']}?view=source-native" for g in groups]
    size = follow_json(served, "/v1/log/checkpoint")["size"]
    assert f'<span class="log-size">{size}</span>' in text
    assert any(a["href"] == "/" and a["text"] == "Home" for a in page.links)


def test_run_page_shows_every_section_of_the_record(served: Served) -> None:
    text, page = get_page(served, "/runs/7e18c26c")  # a prefix resolves like the API's
    check_markup(text, page)
    record = follow_json(served, page.json_link())
    assert record["digest"] == SEED
    assert page.json_link() == f"/v1/runs/{SEED}"
    # The source's own summary line, as the seed page has it.
    assert "SOL 0.5598 · 1.17× reference · 13/16 cases faster" in text

    sections = [t for level, t in page.headings if level == 2]
    assert sections == list(RUN_PAGE_SECTIONS)
    assert SEED in text and "1.751 ms" in text and "1,750,693 ns" in text
    assert 'data-level="reported"' in text
    for reason in record["evidence"]["reasons"]:
        assert html.escape(reason) in text
    assert "Rank 3 of 3 in its comparison group · source-native comparison" in text
    first = record["compareWithFirst"]
    assert f"{first['ratio']:.3f}×" in text and f'href="/runs/{first["b"]}"' in text
    for role, digest in record["identity"]["manifestDigests"].items():
        assert f'<th scope="row">{role}</th><td><code class="digest">{digest}</code>' in text
    assert record["canonicalManifest"] in page.pre  # exactly the hashed bytes, unescaped
    assert "avg_speedup" in text and "1.1676" in text  # source-native metrics
    assert "Demo attestation" in text  # the note
    assert f"/runs/{SEED}" in record["citation"]["permalink"]
    assert record["citation"]["permalink"] in [a["href"] for a in page.links_of("permalink")]

    history = page.links_of("history-link")
    assert [a["href"] for a in history] == [f"/runs/{SEED}/history"]
    board = page.links_of("leaderboard-link")
    assert [a["href"] for a in board] == [
        f"/leaderboards/{record['comparisonKey']}?view=source-native"
    ]


def test_leaderboard_page_ranks_the_group_and_draws_one_bar_per_run(served: Served) -> None:
    key = follow_json(served, f"/v1/runs/{SEED}")["comparisonKey"]
    text, page = get_page(served, f"/leaderboards/{key}")
    check_markup(text, page)
    board = follow_json(served, page.json_link())
    entries = board["entries"]
    assert len(entries) == 3 and board["view"] == "source-native"
    group = next(g for g in follow_json(served, "/v1/groups") if g["comparisonKey"] == key)
    assert page.headings[0] == (1, f"Leaderboard: {group['benchmark']} on {group['gpu']}")
    assert "mean latency · 3 runs in the group" in text

    assert [a["href"] for a in page.links_of("run-link")] == [f"/runs/{e['run']}" for e in entries]
    assert [a["text"] for a in page.links_of("run-link")] == [e["name"] for e in entries]
    ranks = [int(r) for r in _cells(text, "num rank")]
    assert ranks == [e["rank"] for e in entries] == [1, 2, 3]
    assert _cells(text, "num value") == ["1.499 ms", "1.541 ms", "1.751 ms"]

    svg = ET.fromstring(text[text.index("<svg") : text.index("</svg>") + 6])
    bars = svg.findall(".//{http://www.w3.org/2000/svg}rect[@class='bar']")
    assert len(bars) == len(entries)
    widths = [float(b.attrib["width"]) for b in bars]
    assert widths == sorted(widths)  # lower latency, shorter bar, in rank order

    views = page.links_of("view-link")
    assert [a["href"] for a in views] == [
        f"/leaderboards/{key}?view=source-native",
        f"/leaderboards/{key}?view=verified",
    ]
    assert views[0].get("aria-current") == "page" and views[1].get("aria-current") is None

    text, page = get_page(served, f"/leaderboards/{key}?view=verified")
    check_markup(text, page)
    assert follow_json(served, page.json_link())["entries"] == []
    assert "No run is ranked in the verified view" in text and "<svg" not in text


def _cells(text: str, css_class: str) -> list[str]:
    marker = f'<td class="{css_class}">'
    return [part.split("</td>", 1)[0] for part in text.split(marker)[1:]]


def test_history_page_lists_each_event_with_its_verification(served: Served) -> None:
    text, page = get_page(served, f"/runs/{SEED[:20]}/history")
    check_markup(text, page)
    history = follow_json(served, page.json_link())
    assert history["run"] == SEED
    events = history["events"]
    titles = [t for level, t in page.headings if level == 3]
    assert titles == [f"#{e['position']} · {e['event']}" for e in events]
    for event in events:
        assert f"<dt>Leaf index</dt><dd>{event['leafIndex']}</dd>" in text
        assert f"<dd>{event['receivedAt']}</dd>" in text
        assert f"{event['signer']}</code></a> ({event['role']})" in text
        assert html.escape(event["says"]) in text
    assert text.count("✓ verified") == len(events)
    assert [a["href"] for a in page.links_of("run-link")] == [f"/runs/{SEED}"]


def test_user_supplied_text_is_escaped_everywhere(served: Served) -> None:
    c = served.client
    alice = SigningKey.generate()
    registration = key_registration_envelope(alice.public, [Role.ATTESTER], alice, label="alice")
    assert c.post("/v1/keys", json=registration).status_code == 201
    note = attestation_envelope(
        SEED,
        SEED_NAME,
        alice,
        type_="reproduced",
        body=HOSTILE,
        observed_ns=1_760_000,
        environment_summary=HOSTILE,
        evidence_url="https://example.org/evidence?a=1&b=<2>",
    )
    assert c.post(f"/v1/runs/{SEED}/attestations", json=note).status_code == 201
    manifests = seed_manifests()
    manifests["run"]["metadata"]["name"] = "sol-submission-hostile"
    manifests["run"]["metadata"]["title"] = HOSTILE
    manifests["run"]["spec"]["observedAt"] = "2026-08-23T00:00:00.000Z"  # digests cover spec
    ingestion = ingestion_envelope(manifests, served.home.key("ingester"))
    reply = c.post("/v1/runs", json=ingestion)
    assert reply.status_code == 201, reply.text
    hostile_run = reply.json()["subjectDigest"]

    for path in (f"/runs/{SEED}", f"/runs/{SEED}/history", f"/runs/{hostile_run}", "/"):
        text, page = get_page(served, path)
        check_markup(text, page)
        # The one script a page may have is this site's search suggestions (the CSP allows
        # no other); nothing a user wrote becomes a tag.
        mine = text.replace('<script src="/static/search.js" defer></script>', "")
        assert "<script" not in mine and "<img" not in text, path
        assert "alert" not in text or "&lt;script&gt;alert(" in text, path
    text, _ = get_page(served, f"/runs/{SEED}")
    assert "Observed latency 1.760 ms" in text  # a replication, listed as one
    assert 'href="https://example.org/evidence?a=1&amp;b=&lt;2&gt;"' in text
    text, page = get_page(served, f"/runs/{hostile_run}")
    assert page.headings[0] == (1, HOSTILE)  # shown as the text it is


def test_a_retracted_run_says_so_and_is_not_ranked(served: Served) -> None:
    c = served.client
    admin = served.home.key("admin")
    retract = lifecycle_envelope(SEED, SEED_NAME, admin, action="retract", reason="<b>dup</b>")
    assert c.post(f"/v1/runs/{SEED}/lifecycle", json=retract).status_code == 201
    text, page = get_page(served, f"/runs/{SEED}")
    check_markup(text, page)
    assert "This run was retracted" in text and "Not ranked: it was retracted." in text
    key = follow_json(served, f"/v1/runs/{SEED}")["comparisonKey"]
    _, board = get_page(served, f"/leaderboards/{key}")
    assert f"/runs/{SEED}" not in [a["href"] for a in board.links_of("run-link")]
    text, _ = get_page(served, f"/runs/{SEED}/history")
    assert "&lt;b&gt;dup&lt;/b&gt;" in text and "<b>dup" not in text


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/runs/abcdef", 404, "no run has the digest, digest prefix, name or external id"),
        ("/runs/abcdef/history", 404, "no run has the digest, digest prefix, name or external"),
        ("/runs/zz", 404, "(a prefix needs 4+ hex)"),
        ("/runs/" + "a" * 80, 400, "digest"),
        ("/leaderboards/sha256:" + "0" * 64, 404, "no comparison group"),
        ("/leaderboards/not-a-key", 404, "is not a comparison key or a prefix of one"),
        ("/leaderboards/sha256:" + "0" * 64 + "?view=best", 400, "view"),
    ],
)
def test_errors_on_pages_are_html_with_the_right_status(
    served_sqlite: Served, path: str, status: int, says: str
) -> None:
    text, page = get_page(served_sqlite, path, status)
    check_markup(text, page)
    assert page.headings[0][0] == 1 and str(status) in page.headings[0][1]
    assert says in html.unescape(text)
    assert any(a["href"] == "/" for a in page.links)
    # The JSON API keeps answering problem+json for the same mistakes.
    api = served_sqlite.client.get("/v1" + path)
    assert api.headers["content-type"].startswith("application/problem+json")


def test_pages_stay_out_of_the_openapi_document_and_the_stylesheet_is_served(
    served_sqlite: Served,
) -> None:
    c = served_sqlite.client
    paths = c.get("/schema/openapi.json").json()["paths"]
    # The API, health, and the C2SP monitoring checkpoint (a spec's path, not a page).
    api = ("/v1/", "/health")
    assert all(p.startswith(api) or p == "/checkpoint" for p in paths), sorted(paths)
    css = c.get("/static/style.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "font-family" in css.text


def render(template: str, **context: Any) -> tuple[str, Page]:
    """A template rendered directly, for states the demo ledger does not reach."""
    text = template_config().to_engine().get_template(template).render(**context)
    return text, Page(text)


def test_history_page_names_the_checks_an_event_fails(served_sqlite: Served) -> None:
    history = follow_json(served_sqlite, f"/v1/runs/{SEED}/history")
    bad = history["events"][1]
    bad["verified"] = False
    bad["checks"] = [
        {"name": "signature", "ok": False, "detail": "does not verify <for> key"},
        {"name": "role", "ok": True, "detail": ""},
        {"name": "key-valid", "ok": False, "detail": ""},
    ]
    bad["leafIndex"] = None
    history["allVerified"] = False
    text, page = render(
        "history.html",
        history=to_response(history, RunHistory),
        run={"name": SEED_NAME},
        json_href="/v1/x",
        run_href="/runs/x",
    )
    check_markup(text, page)
    assert "✗ Some events fail verification" in text and "✗ failed:" in text
    assert "<li><code>signature</code>: does not verify &lt;for&gt; key</li>" in text
    assert "<li><code>key-valid</code></li>" in text and "<code>role</code>" not in text
    assert "not yet in the log" in text and text.count("✓ verified") == 1


def test_run_page_lists_reruns_and_replications(served_sqlite: Served) -> None:
    record = follow_json(served_sqlite, f"/v1/runs/{SEED}")
    record["measurements"]["reruns"] = [
        {
            "position": 12,
            "signer": "sha256:" + "a" * 64,
            "role": "agent",
            "receivedAt": "2026-11-29T00:00:00.000Z",
            "verified": True,
            "jobId": "job-1",
            "summary": {
                "allCorrect": True,
                "medianNs": 1_701_000,
                "ci95Ns": [1_690_000, 1_712_500],
                "samples": 200,
            },
            "environment": {"product": "NVIDIA B200", "architecture": "sm_100"},
            "says": "rerun result",
        }
    ]
    record["replications"] = [
        {
            "position": 13,
            "signer": "sha256:" + "b" * 64,
            "role": "attester",
            "receivedAt": "2026-11-29T00:00:01.000Z",
            "verified": False,
            "type": "could_not_reproduce",
            "body": "slower here",
            "observedNs": 2_000_000,
            "environmentSummary": None,
            "evidenceUrl": "javascript:alert(1)",
            "reason": None,
        }
    ]
    record["standings"] = {}
    del record["compareWithFirst"]
    text, page = render(
        "run.html",
        run=to_response(record, RunRecord),
        json_href="/v1/x",
        history_href="/runs/x/history",
    )
    check_markup(text, page)
    assert "<code>job-1</code>" in text and "✓ all cases" in text
    assert "1.701 ms" in text and "1.690 ms – 1.712 ms" in text
    assert "could_not_reproduce" in text and "✗ fails verification" in text
    assert "Observed latency 2.000 ms" in text
    # A link only for http(s): anything else from a statement is shown as inert text.
    assert 'href="javascript:' not in text and "<code>javascript:alert(1)</code>" in text
    assert "Not ranked" in text and "No #1 run to compare with." in text


# ------------------------------------------------------------------------ chart, format


def test_chart_draws_one_labelled_bar_per_run_in_order() -> None:
    bars = [
        Bar("#1 fast", 1_000.0, "1.00 µs", "verified"),
        Bar("#2 slow", 4_000.0, "4.00 µs", "reported"),
        Bar("#3 " + HOSTILE, 2_000.0, "2.00 µs", "nonsense"),
    ]
    svg = bar_chart(bars, title="Latency <per run>", description="3 & more", chart_id="c1")
    root = ET.fromstring(svg)  # well-formed XML, so every text was escaped
    ns = {"s": "http://www.w3.org/2000/svg"}
    assert root.attrib["role"] == "img"
    assert root.attrib["aria-labelledby"] == "c1-title c1-desc"
    assert root.find("s:title", ns) is not None
    assert root.find("s:title", ns).text == "Latency <per run>"  # type: ignore[union-attr]
    assert root.find("s:desc", ns).text == "3 & more"  # type: ignore[union-attr]
    rects = root.findall(".//s:rect[@class='bar']", ns)
    assert len(rects) == 3
    widths = [float(r.attrib["width"]) for r in rects]
    assert widths[1] == max(widths) and widths[0] == pytest.approx(widths[1] / 4, rel=0.01)
    assert rects[0].attrib["fill"] == LEVEL_COLOURS["verified"]
    assert rects[1].attrib["fill"] == LEVEL_COLOURS["reported"]
    labels = [t.text for t in root.findall(".//s:g/s:text", ns)]
    assert labels[0] == "#1 fast" and labels[1] == "1.00 µs"
    assert "<script" not in svg


def test_chart_survives_empty_zero_and_non_finite_values() -> None:
    empty = ET.fromstring(bar_chart([], title="t", description="d", chart_id="e"))
    assert empty.findall(".//{http://www.w3.org/2000/svg}rect") == []
    odd = [Bar("a", 0.0, "0 ns"), Bar("b", math.nan, "?"), Bar("c", -5.0, "-5 ns")]
    root = ET.fromstring(bar_chart(odd, title="t", description="d", chart_id="o"))
    widths = [float(r.attrib["width"]) for r in root.iter("{http://www.w3.org/2000/svg}rect")]
    assert widths == [0.0, 0.0, 0.0]


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=6))
def test_every_finite_value_draws_a_bar_within_the_chart(values: list[float]) -> None:
    """Any value admission accepts (a claimed 1e308 included) draws a finite bar no longer
    than the chart: span x value overflowed to width="inf" before the ratio came first."""
    bars = [Bar(f"#{i}", v, str(v)) for i, v in enumerate(values)]
    root = ET.fromstring(bar_chart(bars, title="t", description="d", chart_id="p"))
    rects = root.findall(".//{http://www.w3.org/2000/svg}rect[@class='bar']")
    widths = [float(r.attrib["width"]) for r in rects]
    assert len(widths) == len(values)
    span = WIDTH - LABEL_WIDTH - VALUE_WIDTH
    assert all(math.isfinite(w) and 0.0 <= w <= span for w in widths), widths


@given(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([None, "ns", "us", "ms", "s", "score", "TFLOP/s"]),
)
def test_every_finite_value_reads_in_a_few_characters(value: float, unit: str | None) -> None:
    """A time or a ratio is never spelled in full: a claimed 1e308 ns read as 300 digits
    and widened its leaderboard past the page."""
    assert len(format_ns(value)) <= 16, format_ns(value)
    assert len(format_value(value, unit)) <= 24, format_value(value, unit)
    assert len(format_ratio(value)) <= 16, format_ratio(value)


def test_formatting_for_people() -> None:
    assert format_ns(1_750_693) == "1.751 ms"
    assert format_ns(12_345) == "12.35 µs"
    assert format_ns(950) == "950 ns"
    assert format_ns(2_500_000_000) == "2.500 s"
    assert format_ns(None) == format_ns(math.inf) == "—"
    assert format_value(0.559752, "score") == "0.559752 score"
    assert format_value(1_499_085.0, "ns") == "1.499 ms"
    assert format_ratio(1.167841) == "1.168×" and format_ratio(None) == "—"
    assert format_number(1_750_693) == "1,750,693" and format_number(1.750693) == "1.750693"
    assert format_number(True) == "yes" and format_number(None) == "—"
    assert short_digest(SEED) == "sha256:7e18c26ca3b6…" and short_digest(None) == "—"
    assert safe_url("https://example.org/x") == "https://example.org/x"
    assert safe_url("javascript:alert(1)") is None and safe_url(" data:text/html,x") is None


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_every_evidence_level_has_a_badge_colour_readable_with_white_text() -> None:
    assert list(LEVEL_COLOURS) == [level.label for level in sorted(EvidenceLevel)]
    for level, colour in LEVEL_COLOURS.items():
        contrast = (1.0 + 0.05) / (_luminance(colour) + 0.05)
        assert contrast >= 4.5, (level, colour, contrast)


def test_the_records_feed_is_atom_with_each_groups_first(served: Served) -> None:
    from xml.etree import ElementTree as ET

    reply = served.client.get("/feeds/records.atom")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("application/atom+xml")
    atom = "{http://www.w3.org/2005/Atom}"
    feed = ET.fromstring(reply.content)
    assert feed.tag == f"{atom}feed" and feed.find(f"{atom}updated") is not None
    entries = feed.findall(f"{atom}entry")
    record = follow_json(served, f"/v1/runs/{SEED}")
    board = follow_json(served, f"/v1/leaderboards/{record['comparisonKey']}")
    first = board["entries"][0]
    ours = [e for e in entries if record["comparisonKey"] in (e.findtext(f"{atom}id") or "")]
    assert len(ours) == 1
    assert first["run"] in (ours[0].findtext(f"{atom}id") or "")
    link = ours[0].find(f"{atom}link")
    assert link is not None and link.get("href", "").endswith(f"/runs/{first['run']}")
    assert first["name"] in (ours[0].findtext(f"{atom}title") or "")


def test_a_run_badge_is_an_svg_of_its_level_and_rank(served: Served) -> None:
    reply = served.client.get("/runs/7e18c26c/badge.svg")
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("image/svg")
    assert "reported · #3 of 3" in reply.text and "<script" not in reply.text
    assert served.client.get("/runs/ffffffff/badge.svg").status_code == 404
    text, _ = get_page(served, f"/runs/{SEED}")
    assert f"/runs/{SEED}/badge.svg" in text


def test_the_workload_reads_as_a_suite_of_cases_with_their_axes(served: Served) -> None:
    record = follow_json(served, f"/v1/runs/{SEED}")
    workload = record["workload"]
    assert workload["description"] == "suite of 16 cases · mean latency"
    assert workload["cases"] == 16 == len(workload["rows"]) and workload["axes"]
    text, _ = get_page(served, f"/runs/{SEED}")
    assert "suite of 16 cases · mean latency" in text
    # Axes with one value on every case are stated once; the others are the table's columns.
    constants = workload["constants"]
    assert constants and all(f"<code>{a}</code> = {v}" in text for a, v in constants.items())
    varying = [axis for axis in workload["axes"] if axis not in constants]
    assert varying and all(f">{axis}</th>" in text for axis in varying)
    assert not any(f">{axis}</th>" in text for axis in constants)


def test_a_single_case_workload_shows_its_axes_and_tensors() -> None:
    from api.service.models import to_builtins
    from api.service.run_record import workload_section

    case = {
        "kind": "WorkloadCase",
        "metadata": {"name": "gemm", "title": "GEMM · k=7168"},
        "spec": {
            "axes": {"k": 7168, "m": 6144},
            "correctness": {"comparator": "kernelbot_eval"},
            "tensors": {"a": {"dtype": "fp8_e4m3fnuz", "shape": [6144, 7168]}},
        },
    }
    summary = to_builtins(workload_section(None, case))
    assert summary["description"] == "a single case" and summary["cases"] == 1
    assert summary["axes"] == ["k", "m"] and summary["rows"][0]["axes"] == [7168, 6144]
    assert summary["tensors"] == [{"name": "a", "dtype": "fp8_e4m3fnuz", "shape": [6144, 7168]}]
    assert summary["comparator"] == "kernelbot_eval"


def test_two_to_eight_runs_compare_side_by_side_and_export(served: Served) -> None:
    c = served.client
    key = follow_json(served, f"/v1/runs/{SEED}")["comparisonKey"]
    board = follow_json(served, f"/v1/leaderboards/{key}")["entries"]
    same = ",".join(e["run"][:12] for e in board)  # the seed's group, by prefixes
    result = c.get("/v1/comparisons", params={"runs": same}).json()
    assert result["comparable"] is True and len(result["runs"]) == 3
    assert result["runs"][0]["ratioToFirst"] == pytest.approx(1.0)
    names = {d["path"] for d in result["differences"]}
    assert "run.metadata.name" in names
    # Another group (stack v1.0): named, and what separates it said.
    mixed = c.get("/v1/comparisons", params={"runs": f"{SEED[:12]},sol-submission-15149"}).json()
    assert mixed["comparable"] is False and "differs in protocol" in mixed["notComparableBy"]
    md = c.get("/v1/comparisons", params={"runs": same, "format": "md"})
    assert md.headers["content-type"].startswith("text/markdown")
    assert md.text.startswith("All runs are in one comparison group.") and "| --- |" in md.text
    csv_text = c.get("/v1/comparisons", params={"runs": same, "format": "csv"}).text
    assert csv_text.splitlines()[1].startswith("run digest,")
    text, page = get_page(served, f"/compare?runs={same}")
    check_markup(text, page)
    assert "All 3 runs are in one comparison group" in text
    for refused in (SEED[:12], f"{SEED[:12]},{SEED[:12]}", ",".join(["7e18c26c"] * 9)):
        assert c.get("/v1/comparisons", params={"runs": refused}).status_code in (400, 422)
    seed_page, _ = get_page(served, f"/runs/{SEED}")
    assert "/compare?runs=" in seed_page
