"""`kernelindex compare`'s field differences fitted to the terminal: a table when every cell
fits unfolded, else one block per field; no line wider than the terminal, nothing lost."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from api.cli.compare_table import HEADER, difference_lines

# Paths, names, digests, JSON-ish values: words and spaces, some words longer than a line.
_WORD = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=90)
_CELL = st.lists(_WORD, min_size=1, max_size=8).map(" ".join)
_ROWS = st.lists(st.tuples(_WORD, _CELL, _CELL), min_size=1, max_size=6)


def _blocks(lines: list[str]) -> list[tuple[str, str, str]]:
    """The rows back from block lines: a path starts at column 0, `a`/`b` after four spaces."""
    rows: list[list[str]] = []
    for line in lines:
        if not line.startswith(" "):
            rows.append([line, "", ""])
        elif line.startswith("    a  "):
            rows[-1][1] = line[7:]
        elif line.startswith("    b  "):
            rows[-1][2] = line[7:]
        else:
            cell = 2 if rows[-1][2] else 1 if rows[-1][1] else 0
            rows[-1][cell] += " " + line.strip()
    return [(f, a, b) for f, a, b in rows]


def _squeezed(text: str) -> str:
    return "".join(text.split())


@given(rows=_ROWS, width=st.integers(20, 200))
def test_no_line_is_wider_than_the_terminal_and_nothing_is_lost(
    rows: list[tuple[str, str, str]], width: int
) -> None:
    lines = difference_lines(rows, width)
    assert all(len(line) <= width for line in lines)
    if lines[0].split() == list(HEADER):  # the whole table fitted
        assert len(lines) == len(rows) + 1
        for line, (field, a, b) in zip(lines[1:], rows, strict=True):
            assert _squeezed(line) == _squeezed(field + a + b)
    else:
        back = _blocks(lines)
        assert [tuple(_squeezed(c) for c in r) for r in back] == [
            tuple(_squeezed(c) for c in r) for r in rows
        ]


def test_a_table_when_it_fits_blocks_when_it_does_not() -> None:
    rows = [("run.metadata.name", "sol-submission-38823", "sol-submission-21613")]
    assert difference_lines(rows, 80) == [
        "field              a                     b",
        "run.metadata.name  sol-submission-38823  sol-submission-21613",
    ]
    digest = "sha256:" + "ab" * 32
    rows.append(("run.spec.implementationDigest", digest, "absent"))
    assert difference_lines(rows, 80) == [
        "run.metadata.name",
        "    a  sol-submission-38823",
        "    b  sol-submission-21613",
        "run.spec.implementationDigest",
        f"    a  {digest}",
        "    b  absent",
    ]
