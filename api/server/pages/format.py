"""How the pages write numbers, digests and nested values for people (Jinja filters)."""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import quote, urlsplit

from api.display import format_measurement, source_summary, unranked_reason
from api.service.models import to_builtins
from api.service.models.runs import RunRecord
from domain.evidence import EvidenceLevel
from domain.quantities import format_fixed, format_ns, format_number, format_value

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


def format_ratio(ratio: float | None) -> str:
    if ratio is None or isinstance(ratio, bool) or not math.isfinite(ratio):
        return "—"
    return f"{format_fixed(ratio, 3)}×"


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


def measurement_text(primary: Any) -> str:
    """A reply's primary measurement (a model) as people read it (``api.display``, which
    reads the documents the models encode to)."""
    return format_measurement(to_builtins(primary))


def unranked_text(record: RunRecord) -> str:
    """Why a run record has no source-native rank (``api.display.unranked_reason``)."""
    key = record.comparison_key if isinstance(record.comparison_key, str) else None
    return unranked_reason(
        {
            "digest": record.digest,
            "primary": {"value": record.primary.value},
            "comparisonKey": key,
            "status": record.status,
            "retracted": record.retracted,
            "supersededBy": record.superseded_by,
            "workloadDigest": record.workload_digest,
        }
    )


FILTERS: dict[str, Any] = {
    "ns": format_ns,
    "value": format_value,
    "ratio": format_ratio,
    "number": format_number,
    "measurement": measurement_text,
    "source_summary": source_summary,
    "unranked_reason": unranked_text,
    "short": short_digest,
    "pretty_json": pretty_json,
    "level_colour": level_colour,
    "safe_url": safe_url,
    "segment": path_segment,
}
