"""What leaderboard users subscribe to and embed: an Atom feed of #1 records and an SVG
badge per run. Both are drawn here from the read models, escaped by the XML writer (feed)
or by ``html.escape`` (badge), and carry no script."""

from __future__ import annotations

from html import escape
from typing import Annotated, Any
from xml.etree import ElementTree as ET

from litestar import Controller, Request, Response, get
from litestar.params import QueryParameter

from api.display import format_value
from api.server.controllers.common import Service
from api.server.controllers.runs import DigestPath
from api.server.pages.format import level_colour
from domain.timestamps import format_time, utc_now
from projections.queries import group_leaders, run_row, standings

ATOM = "http://www.w3.org/2005/Atom"
ATOM_TYPE = "application/atom+xml"
SVG_TYPE = "image/svg+xml"


def records_feed(base: str, leaders: list[dict[str, Any]], updated: str) -> bytes:
    """An Atom 1.0 document (RFC 4287) of the groups' current #1 runs."""
    ET.register_namespace("", ATOM)
    feed = ET.Element(f"{{{ATOM}}}feed")
    ET.SubElement(feed, f"{{{ATOM}}}title").text = "KernelIndex Ledger: #1 records"
    ET.SubElement(feed, f"{{{ATOM}}}id").text = f"{base}/feeds/records.atom"
    ET.SubElement(feed, f"{{{ATOM}}}updated").text = updated
    ET.SubElement(feed, f"{{{ATOM}}}link", rel="self", href=f"{base}/feeds/records.atom")
    author = ET.SubElement(feed, f"{{{ATOM}}}author")
    ET.SubElement(author, f"{{{ATOM}}}name").text = "KernelIndex Ledger"
    for row in leaders:
        entry = ET.SubElement(feed, f"{{{ATOM}}}entry")
        value = format_value(row["value"], row["unit"])
        title = f"#1 {row['benchmark']} on {row['product']}: {row['name']} ({value})"
        ET.SubElement(entry, f"{{{ATOM}}}title").text = title
        # One entry per (group, leader): a new #1 is a new entry.
        ET.SubElement(
            entry, f"{{{ATOM}}}id"
        ).text = f"urn:kernelindex:record:{row['comparison_key']}:{row['run_digest']}"
        ET.SubElement(entry, f"{{{ATOM}}}updated").text = str(row["ingested_at"])
        ET.SubElement(entry, f"{{{ATOM}}}link", href=f"{base}/runs/{row['run_digest']}")
        if row["author"]:
            who = ET.SubElement(entry, f"{{{ATOM}}}author")
            ET.SubElement(who, f"{{{ATOM}}}name").text = str(row["author"])
        ET.SubElement(entry, f"{{{ATOM}}}summary").text = (
            f"{row['statistic']} {row['metric']} {value} · evidence {row['evidence_level']} · "
            f"source {row['source']} · comparison group {row['comparison_key']}"
        )
    body: bytes = ET.tostring(feed, encoding="utf-8", xml_declaration=True)
    return body


def badge_of(record: dict[str, Any]) -> str:
    """The badge of a run record (``run_record``/``run_page``): its level and standing."""
    level = str((record.get("evidence") or {}).get("level") or "unknown")
    standing = (record.get("standings") or {}).get("source-native")
    rank = f"#{standing['rank']} of {standing['of']}" if standing else "not ranked"
    return run_badge(level, rank)


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

    @get("/feeds/records.atom", sync_to_thread=True, name="feed-records")
    def records(
        self,
        request: Request[Any, Any, Any],
        service: Service,
        limit: Annotated[int, QueryParameter(ge=1, le=500)] = 50,
    ) -> Response[bytes]:
        service.fresh()
        _, leaders = service.runner.snapshot(lambda session: group_leaders(session, limit))
        base = (request.app.state.config.public_url or "").rstrip("/")
        latest = max((str(r["ingested_at"]) for r in leaders), default=format_time(utc_now()))
        return Response(records_feed(base, leaders, latest), media_type=ATOM_TYPE)

    @get("/runs/{digest:str}/badge.svg", sync_to_thread=True, name="run-badge")
    def badge(self, service: Service, digest: DigestPath) -> Response[str]:
        run = service.resolve(digest)

        def read(session: Any) -> dict[str, Any]:
            # The few fields of a run record a badge shows (not the whole record).
            row = run_row(session, run)
            places = standings(session, run)
            return {
                "evidence": {"level": row["evidence_level"] if row else None},
                "standings": {v: {"rank": s.rank, "of": s.of} for v, s in places.items()},
            }

        _, record = service.runner.snapshot(read)
        return Response(
            badge_of(record),
            media_type=SVG_TYPE,
            headers={"Cache-Control": "public, max-age=300"},
        )
