"""How the pages write numbers, digests and nested values for people (Jinja filters)."""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import quote, urlsplit

from domain.evidence import EvidenceLevel

# Badge and bar colours per evidence level, weakest to strongest. Each carries white text, so
# every colour keeps a WCAG AA contrast of at least 4.5:1 against white (tests check it).
LEVEL_COLOURS: dict[str, str] = {
    "refuted": "#b3261e",
    "reported": "#595f69",
    "reproducible": "#8a5300",
    "verified": "#1d6b33",
    "replicated": "#1849a9",
}
UNKNOWN_LEVEL_COLOUR = "#3d3d3d"


def badge_rules() -> str:
    """The stylesheet rules that colour each evidence level's badge."""
    rules = [f".badge.evidence {{ background-color: {UNKNOWN_LEVEL_COLOUR}; }}"]
    rules += [
        f'.badge.evidence[data-level="{level}"] {{ background-color: {colour}; }}'
        for level, colour in LEVEL_COLOURS.items()
    ]
    return "\n" + "\n".join(rules) + "\n"


def format_ns(value: float | None) -> str:
    """A latency in the unit a person reads best: 1750693 → "1.751 ms"."""
    if value is None or isinstance(value, bool) or not math.isfinite(value):
        return "—"
    size = abs(value)
    if size >= 1e9:
        return f"{value / 1e9:.3f} s"
    if size >= 1e6:
        return f"{value / 1e6:.3f} ms"
    if size >= 1e3:
        return f"{value / 1e3:.2f} µs"
    return f"{value:.0f} ns"


def format_value(value: float | None, unit: str | None) -> str:
    """A primary value in its unit; latencies in ns get the readable unit."""
    if value is None or isinstance(value, bool) or not math.isfinite(value):
        return "—"
    if unit in (None, "ns"):
        return format_ns(value)
    return f"{value:.6g} {unit}"


def format_ratio(ratio: float | None) -> str:
    if ratio is None or isinstance(ratio, bool) or not math.isfinite(ratio):
        return "—"
    return f"{ratio:.3f}×"


def format_number(value: Any) -> str:
    """Integers with thousands separators, floats as published (shortest repr), others as text."""
    if isinstance(value, bool) or value is None:
        return "—" if value is None else ("yes" if value else "no")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def short_digest(digest: str | None, digits: int = 12) -> str:
    """sha256:7e18c26ca3b6… — enough to tell runs apart on a page, never used as an id."""
    if not digest:
        return "—"
    algorithm, _, hexpart = digest.partition(":")
    if not hexpart:
        return digest[:digits] + ("…" if len(digest) > digits else "")
    return f"{algorithm}:{hexpart[:digits]}…" if len(hexpart) > digits else digest


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def level_colour(level: str | None) -> str:
    return LEVEL_COLOURS.get(str(level or "").lower(), UNKNOWN_LEVEL_COLOUR)


def level_rank(level: str | None) -> int:
    """Position in the order refuted < reported < … < replicated; -1 when unknown."""
    try:
        return int(EvidenceLevel[str(level or "").upper()])
    except KeyError:
        return -1


def safe_url(url: Any) -> str | None:
    """Only http(s) links from signed statements become links (never javascript: and kin)."""
    if not isinstance(url, str):
        return None
    scheme = urlsplit(url.strip()).scheme.lower()
    return url.strip() if scheme in ("http", "https") else None


def path_segment(text: str) -> str:
    """A digest or key as one URL path segment (":" is allowed there; "/" and "?" are not)."""
    return quote(text, safe=":")


FILTERS: dict[str, Any] = {
    "ns": format_ns,
    "value": format_value,
    "ratio": format_ratio,
    "number": format_number,
    "short": short_digest,
    "pretty_json": pretty_json,
    "level_colour": level_colour,
    "safe_url": safe_url,
    "segment": path_segment,
}
