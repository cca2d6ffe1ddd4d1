"""The search page, its suggestions and the home page over HTTP, on the demo ledger (both
backends): the page shows what ``GET /v1/search`` answers for the same query, its facets and
sorts are links that narrow and reorder, every page is linked, a bad parameter is a 400 page,
suggestions answer JSON from ``/v1/search/suggest``, and the script that asks for them is
this site's own file (no inline script, the CSP allows only it)."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

from served_app import Served
from test_pages import check_markup, get_page

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"


def _hrefs(text: str, css: str) -> list[str]:
    """The links inside the first element with class ``css``."""
    start = text.index(f'class="{css}')
    end = text.index("</nav>" if "nav" in text[start - 20 : start] else "</aside>", start)
    return [unescape(h) for h in re.findall(r'href="([^"]+)"', text[start:end])]


def test_the_search_page_shows_the_apis_answer_with_facets_sorts_and_pages(
    served: Served,
) -> None:
    c = served.client
    found = c.get("/v1/search", params={"q": "B200", "perPage": 20}).json()
    text, page = get_page(served, "/search?q=B200")
    check_markup(text, page)
    assert page.json_link() == "/v1/search?q=B200&page=1&perPage=20"
    assert c.get(page.json_link()).json() == found
    shown = re.findall(r'<a href="/leaderboards/(sha256:[0-9a-f]{64})\?', text)
    assert shown == [g["comparisonKey"] for g in found["items"]]
    assert f"{found['total']} comparison groups match “B200” · page 1 of 1" in text
    # Each facet value links to the same search narrowed to it, and says how many it leaves.
    facets = _hrefs(text, "facets")
    for facet in found["facets"]:
        for value in facet["values"]:
            href = next(h for h in facets if parse_qs(urlsplit(h).query).get(facet["name"]))
            narrowed = parse_qs(urlsplit(href).query)
            assert narrowed["q"] == ["B200"] and "page" not in narrowed
            assert f'{value["value"]} <span class="count">{value["count"]}</span>' in text
    sorts = _hrefs(text, "sorts")
    assert [parse_qs(urlsplit(h).query).get("sort", ["relevance"])[0] for h in sorts] == [
        "relevance",
        "runs",
        "newest",
        "name",
    ]


def test_every_page_of_a_search_is_linked_and_a_filter_can_be_removed(served: Served) -> None:
    c = served.client
    found = c.get("/v1/search", params={"q": "B200", "gpu": "b200", "perPage": 1}).json()
    last = found["pages"]
    assert last == found["total"] >= 2  # the seed's group and its lookalike
    text, _ = get_page(served, "/search?q=B200&gpu=b200&perPage=1")
    assert 'aria-label="Remove the filter GPU b200"' in text
    assert 'href="/search?q=B200&amp;perPage=1"' in text  # the filter removed
    pager = _hrefs(text, "pager")
    for n in range(2, last + 1):
        assert f"/search?q=B200&gpu=b200&perPage=1&page={n}" in pager
    keys = []
    for n in range(1, last + 1):
        text, _ = get_page(served, f"/search?q=B200&gpu=b200&perPage=1&page={n}")
        keys += re.findall(r'<a href="/leaderboards/(sha256:[0-9a-f]{64})\?', text)
        assert ('rel="next"' in text) == (n < last) and ('rel="prev"' in text) == (n > 1)
    assert sorted(keys) == sorted(
        g["comparisonKey"]
        for g in c.get("/v1/search", params={"q": "B200", "perPage": 100}).json()["items"]
    )


def test_bad_search_parameters_are_400_pages_and_problems(served: Served) -> None:
    c = served.client
    for query in ("sort=fastest", "level=gold", "page=0", "q=b200&page=999"):
        page = c.get(f"/search?{query}")
        assert page.status_code == 400, query
        assert page.headers["content-type"].startswith("text/html")
        api = c.get(f"/v1/search?{query}")
        assert api.status_code == 400 and api.json()["code"] == "malformed-request", query


def test_suggestions_answer_json_and_the_script_is_the_sites_own(served: Served) -> None:
    c = served.client
    found = c.get("/v1/search/suggest", params={"q": "056_lang"}).json()
    assert found["query"] == "056_lang"
    kinds = [s["kind"] for s in found["suggestions"]]
    assert kinds[0] == "operation" and "group" in kinds
    for s in found["suggestions"]:
        assert c.get(s["href"]).status_code == 200, s
    assert c.get("/v1/search/suggest", params={"q": "x"}).json()["suggestions"] == []
    script = c.get("/static/search.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "/v1/search/suggest" not in script.text  # the URL comes from the page's input
    assert "innerHTML" not in script.text and "eval(" not in script.text
    for path in ("/", "/search"):
        text = c.get(path).text
        assert 'data-suggest="/v1/search/suggest"' in text
        assert re.findall(r"<script[^>]*>", text) == ['<script src="/static/search.js" defer>']
        assert "<script>" not in text


def test_the_home_page_is_search_first_and_the_nav_has_no_json(served: Served) -> None:
    text, page = get_page(served, "/")
    check_markup(text, page)
    assert text.index('action="/search"') < text.index("<table")
    nav = text[text.index("<nav") : text.index("</nav>")]
    assert 'type="application/json"' not in nav and "(JSON)" not in nav
    assert nav.count('href="/schema/openapi.json"') == 1
    # The log's internals have their own page; the home page links it.
    assert 'href="/log"' in text and "Root hash" not in text
    log, log_page = get_page(served, "/log")
    check_markup(log, log_page)
    checkpoint = served.client.get("/v1/log/checkpoint").json()
    assert checkpoint["rootHash"] in log and log_page.json_link() == "/v1/log/checkpoint"
    # Ways in by GPU: each the search narrowed to it.
    assert 'href="/search?gpu=NVIDIA%20B200"' in text
    assert f'href="/runs/{SEED}"' not in nav
