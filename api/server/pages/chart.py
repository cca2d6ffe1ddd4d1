"""The leaderboard's latency chart: a server-drawn SVG of horizontal bars (no script).

A pure function of its bars, so it is tested without a server. Every text is escaped here
because the result is inserted into the page as markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from api.server.pages.format import level_colour

WIDTH = 760
LABEL_WIDTH = 250
VALUE_WIDTH = 110
ROW_HEIGHT = 30
BAR_HEIGHT = 18
TOP = 8
BOTTOM = 8
MAX_LABEL_CHARS = 34
TEXT_COLOUR = "#1a1a1a"
AXIS_COLOUR = "#6b6b6b"


@dataclass(frozen=True)
class Bar:
    """One run: ``label`` names it, ``value`` sets the length, ``value_text`` is printed."""

    label: str
    value: float
    value_text: str
    level: str | None = None


def _clip(text: str, limit: int = MAX_LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _length(value: float, top: float, span: float) -> float:
    # Bars start at zero so lengths compare honestly; a non-finite or negative value draws none.
    if not math.isfinite(value) or value <= 0 or top <= 0:
        return 0.0
    return max(1.0, span * (value / top))  # the ratio first: span × 1e308 overflows


def bar_chart(bars: Sequence[Bar], *, title: str, description: str, chart_id: str) -> str:
    """SVG markup: one ``<rect class="bar">`` per bar, in the order given, best first.

    ``role="img"`` with ``<title>``/``<desc>`` named by ``aria-labelledby`` gives screen
    readers the chart's name and a description; the page's table carries the same numbers.
    """
    ident = escape(chart_id, quote=True)
    height = TOP + BOTTOM + ROW_HEIGHT * max(1, len(bars))
    finite = [b.value for b in bars if math.isfinite(b.value) and b.value > 0]
    top = max(finite, default=0.0)
    span = WIDTH - LABEL_WIDTH - VALUE_WIDTH
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{ident}" role="img" '
        f'aria-labelledby="{ident}-title {ident}-desc" viewBox="0 0 {WIDTH} {height}" '
        f'width="100%" preserveAspectRatio="xMinYMin meet" '
        f'font-family="system-ui, sans-serif" font-size="13">',
        f'<title id="{ident}-title">{escape(title)}</title>',
        f'<desc id="{ident}-desc">{escape(description)}</desc>',
    ]
    for index, bar in enumerate(bars):
        y = TOP + index * ROW_HEIGHT
        middle = y + ROW_HEIGHT / 2
        length = _length(bar.value, top, span)
        parts.append(
            f'<g class="row">'
            f'<text x="{LABEL_WIDTH - 8}" y="{middle:.1f}" text-anchor="end" '
            f'dominant-baseline="middle" fill="{TEXT_COLOUR}">{escape(_clip(bar.label))}</text>'
            f'<rect class="bar" x="{LABEL_WIDTH}" y="{middle - BAR_HEIGHT / 2:.1f}" '
            f'width="{length:.1f}" height="{BAR_HEIGHT}" fill="{level_colour(bar.level)}">'
            f"<title>{escape(bar.label)}: {escape(bar.value_text)}</title></rect>"
            f'<text x="{LABEL_WIDTH + length + 6:.1f}" y="{middle:.1f}" '
            f'dominant-baseline="middle" fill="{TEXT_COLOUR}">{escape(bar.value_text)}</text>'
            f"</g>"
        )
    parts.append(
        f'<line x1="{LABEL_WIDTH}" y1="{TOP - 2}" x2="{LABEL_WIDTH}" y2="{height - BOTTOM + 2}" '
        f'stroke="{AXIS_COLOUR}" stroke-width="1"/>'
    )
    parts.append("</svg>")
    return "".join(parts)
