"""The field differences of ``kernelindex compare``, fitted to the terminal's width.

A three-column table reads best when it fits whole; at 80 columns it does not (a manifest
path such as ``implementation.spec.support.hardwareArchitectures[0]`` beside two digests), and
a table squeezed to fit folds every path and value mid-word into unreadable pieces. So the
table is printed only when every cell fits unfolded; otherwise each field is a block: its path
on a line of its own, then ``a`` and ``b`` each on their own lines, wrapped at words.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

GAP = "  "
HEADER = ("field", "a", "b")
INDENT = "    "


def difference_lines(rows: Sequence[tuple[str, str, str]], width: int) -> list[str]:
    """``(field, a, b)`` rows as lines of at most ``width`` characters (``width`` ≥ 20)."""
    if not rows:
        return []
    table = [HEADER, *rows]
    sizes = [max(len(row[i]) for row in table) for i in range(3)]
    if sum(sizes) + 2 * len(GAP) <= width:
        return [
            GAP.join(cell.ljust(size) for cell, size in zip(row, sizes, strict=True)).rstrip()
            for row in table
        ]
    lines: list[str] = []
    for field, a, b in rows:
        lines.extend(_wrapped(field, width, "", "  "))
        lines.extend(_wrapped(a, width, f"{INDENT}a  ", f"{INDENT}   "))
        lines.extend(_wrapped(b, width, f"{INDENT}b  ", f"{INDENT}   "))
    return lines


def _wrapped(text: str, width: int, first: str, later: str) -> list[str]:
    """``text`` wrapped at words (a word longer than a line, such as a digest, is cut) and at
    its own line breaks; empty text stays one line."""
    found: list[str] = []
    for i, part in enumerate(text.split("\n") or [""]):
        lead = first if i == 0 else later
        found.extend(
            textwrap.wrap(
                part,
                width,
                initial_indent=lead,
                subsequent_indent=later,
                break_on_hyphens=False,
                drop_whitespace=True,
            )
            or [lead.rstrip()]
        )
    return found
