"""What leaderboard users subscribe to and embed: an Atom feed of new #1 records as they
happened (the records timeline, ``api.service.records``) and an SVG badge per run. Both are
drawn here from the service's replies, escaped by the XML writer (feed) or by
``html.escape`` (badge), and carry no script."""

from __future__ import annotations

import re
from html import escape
from typing import Annotated, Any
from urllib.parse import urlencode
from xml.etree import ElementTree as ET

from litestar import Controller, Request, Response, get
from litestar.params import QueryParameter

from api.server.controllers.common import Service
from api.server.controllers.runs import DigestPath
from api.server.pages.format import format_ratio, level_colour
from api.service.ledger_service import LedgerService
from api.service.models.registry import RecordEvent, RecordTimeline
from api.service.records import FEED_MAX
from domain.documents import MAX_SAFE_INTEGER
from domain.quantities import format_value

ATOM = "http://www.w3.org/2005/Atom"
ATOM_TYPE = "application/atom+xml"
SVG_TYPE = "image/svg+xml"
FEED_PATH = "/feeds/records.atom"
# An empty feed still needs an ``updated`` (RFC 4287 §4.1.1); a fixed one keeps it stable.
NEVER = "1970-01-01T00:00:00.000Z"
# What XML 1.0 cannot carry at all, even escaped (a manifest's free text may hold it).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: object) -> str:
    return _NOT_XML.sub("\ufffd", str(text))


def _add(parent: ET.Element, tag: str, text: object | None = None, **attrs: str) -> ET.Element:
    """An Atom child element: the writer escapes markup; what XML cannot hold at all (C0
    controls, say) is replaced by U+FFFD, so a manifest's text never breaks the document."""
    element = ET.SubElement(parent, f"{{{ATOM}}}{tag}", {k: _xml(v) for k, v in attrs.items()})
    if text is not None:
        element.text = _xml(text)
    return element


def record_title(item: RecordEvent) -> str:
    """``New #1 in GROUP: RUN, VALUE UNIT, beats PREVIOUS by X×``."""
    value = format_value(item.value, item.unit)
    title = f"New #1 in {item.group}: {item.name}, {value}"
    if item.previous_run is None:
        title += ", the group's first ranked run"
    elif item.factor is None:
        was = format_value(item.previous_value, item.unit)
        title += f", beats {item.previous_name} ({was})"
    else:
        title += f", beats {item.previous_name} by {format_ratio(item.factor)}"
    return title + (f" (since {item.withdrawn})" if item.withdrawn else "")


def dated_text(item: RecordEvent) -> str:
    """What a record's date is, in words."""
    if item.dated == "observed":
        return f"dated {item.at}, the source's date of the run (admitted here {item.admitted_at})"
    return f"dated {item.at}, when the ledger admitted the run (its source gave no date)"


def record_summary(item: RecordEvent) -> str:
    value = format_value(item.value, item.unit)
    parts = [
        f"{item.title or item.name}: {item.statistic} {item.metric} {value}",
        dated_text(item),
        f"evidence {item.evidence_level} now",
        f"source {item.source}",
    ]
    if item.previous_run is not None:
        was = format_value(item.previous_value, item.unit)
        parts.append(f"previous #1 {item.previous_name} ({was})")
    if item.withdrawn:
        parts.append(f"the run was {item.withdrawn} since and is off the current board")
    made_of = f" ({item.group_parts})" if item.group_parts else ""
    parts.append(f"comparison group {item.comparison_key}{made_of}")
    return " · ".join(parts)


def records_feed(base: str, records: RecordTimeline, limit: int = FEED_MAX) -> bytes:
    """An Atom 1.0 document (RFC 4287) of new #1 records, newest first (of one group's when
    the timeline has a key). Ids are URNs of group and run, so they stay put whatever the
    host. An entry's ``updated`` is the record's date (``api.service.records``): its source's
    date where it gave one, else the ledger's admission; its summary says which."""
    key = records.comparison_key
    ET.register_namespace("", ATOM)
    feed = ET.Element(f"{{{ATOM}}}feed")
    scope = f" in {records.group}" if records.group else ""
    _add(feed, "title", f"KernelIndex Ledger: new #1 records{scope}")
    _add(feed, "id", "urn:kernelindex:feed:records" + (f":{key}" if key else ""))
    _add(feed, "updated", records.newest or NEVER)
    query = {"group": key} if key else {}
    _add(feed, "link", rel="self", type=ATOM_TYPE, href=_href(base, FEED_PATH, query))
    page = f"/records?{urlencode(query)}" if key else "/records"
    _add(feed, "link", rel="alternate", type="text/html", href=f"{base}{page}")
    if records.next is not None:
        # RFC 5005 paging: the next (older) page starts after this page's oldest record.
        older = {**query, "before": str(records.next), "limit": str(limit)}
        _add(feed, "link", rel="next", type=ATOM_TYPE, href=_href(base, FEED_PATH, older))
    author = _add(feed, "author")
    _add(author, "name", "KernelIndex Ledger")
    for item in records.items:
        entry = _add(feed, "entry")
        _add(entry, "id", f"urn:kernelindex:record:{item.comparison_key}:{item.run}")
        _add(entry, "title", record_title(item))
        _add(entry, "updated", item.at)
        _add(entry, "link", rel="alternate", type="text/html", href=f"{base}/runs/{item.run}")
        if item.author:
            _add(_add(entry, "author"), "name", item.author)
        if item.withdrawn:
            _add(entry, "category", term=item.withdrawn)
        _add(entry, "summary", record_summary(item))
    body: bytes = ET.tostring(feed, encoding="utf-8", xml_declaration=True)
    return body


def feed_of(
    service: LedgerService,
    base: str,
    group: str | None = None,
    before: int | None = None,
    limit: int = FEED_MAX,
) -> bytes:
    """The feed's document as ``GET /feeds/records.atom`` answers it (computed: the read
    cache keeps what it answers): the records timeline ``GET /v1/records`` answers, as Atom.
    ``group``: a key or a unique prefix, resolved as leaderboards do (404 unknown, 400
    ambiguous)."""
    return records_feed(base, service.records.timeline(group, before, limit), limit)


def _href(base: str, path: str, query: dict[str, str]) -> str:
    return f"{base}{path}" + (f"?{urlencode(query)}" if query else "")


def run_badge_svg(level: str | None, standing: tuple[int, int] | None) -> str:
    """The badge of a run: its evidence level and source-native standing (rank, of)."""
    rank = f"#{standing[0]} of {standing[1]}" if standing else "not ranked"
    return run_badge(str(level or "unknown"), rank)


def run_badge(level: str, rank: str) -> str:
    """A shields-style badge: "KernelIndex | reported · #3 of 3"."""
    left, right = "KernelIndex", f"{level} · {rank}"
    lw, rw = 12 + 7 * len(left), 12 + 7 * len(right)
    label = escape(f"{left}: {right}")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{lw + rw}" height="20" role="img" '
        f'aria-label="{label}"><title>{label}</title>'
        f'<rect width="{lw}" height="20" fill="#3d3d3d"/>'
        f'<rect x="{lw}" width="{rw}" height="20" fill="{level_colour(level)}"/>'
        f'<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">'
        f'<text x="6" y="14">{escape(left)}</text>'
        f'<text x="{lw + 6}" y="14">{escape(right)}</text></g></svg>'
    )


class FeedController(Controller):
    path = "/"
    include_in_schema = False

    @get(FEED_PATH, sync_to_thread=True, name="feed-records")
    def records(
        self,
        request: Request[Any, Any, Any],
        service: Service,
        group: Annotated[str | None, QueryParameter(max_length=71)] = None,
        before: Annotated[int | None, QueryParameter(ge=1, le=MAX_SAFE_INTEGER)] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=FEED_MAX)] = FEED_MAX,
    ) -> Response[bytes]:
        base = (request.app.state.config.public_url or "").rstrip("/")
        return Response(
            feed_of(service, base, group, before, limit),
            media_type=ATOM_TYPE,
            headers={"Cache-Control": "public, max-age=300"},
        )

    @get("/runs/{digest:str}/badge.svg", sync_to_thread=True, name="run-badge")
    def badge(self, service: Service, digest: DigestPath) -> Response[str]:
        # The few fields of a run record a badge shows (not the whole record).
        badge = service.runs.badge(digest)
        standing = (badge.rank, badge.of) if badge.rank is not None and badge.of else None
        return Response(
            run_badge_svg(badge.level, standing),
            media_type=SVG_TYPE,
            headers={"Cache-Control": "public, max-age=300"},
        )
