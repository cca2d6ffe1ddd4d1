"""GPU names as people type them, matched to the products the ledger stores.

Sources name a GPU "NVIDIA B200" or "AMD Instinct MI300X"; people type "B200", "b200",
"mi300x" or "Hopper". One matcher, so the pages, the API and the CLI take the same words:

1. the whole name, case-insensitively;
2. a known alias (an architecture or marketing name) standing for the words of a product;
3. the typed words as whole words of the name ("B200" is "NVIDIA B200", not "NVIDIA GB200");
4. a case-insensitive part of the name ("MI3" is both MI300X and MI355X: ambiguous).

The first rule that finds anything decides: one product is the match, several are listed as
the candidates to choose from, none is no match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

# Alias (lower case) -> the words a product's name must contain. Only names that are not
# already a part of the products' own names; architecture names stand for their products.
ALIASES: Final[Mapping[str, tuple[str, ...]]] = {
    "hopper": ("h100", "h200", "h800", "h20", "gh200"),
    "blackwell": ("b200", "b300", "gb200", "gb300", "rtx pro 6000"),
    "ampere": ("a100", "a10", "a10g", "a30", "a40"),
    "ada": ("l4", "l40", "l40s", "rtx 4090"),
    "sm_90": ("h100", "h200", "h800", "h20", "gh200"),
    "sm_100": ("b200", "gb200"),
    "sm_80": ("a100", "a30"),
    "mi300": ("mi300x", "mi300a"),
    "cdna3": ("mi300x", "mi300a", "mi325x"),
    "cdna4": ("mi350x", "mi355x"),
}

_WORD: Final = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class GpuMatch:
    """What ``typed`` matched: ``name`` when exactly one product, else ``candidates`` (the
    products it could mean, sorted; empty when none)."""

    typed: str
    name: str | None
    candidates: tuple[str, ...]
    rule: str  # which rule decided: "exact", "alias", "words", "part" or "none"


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _has_words(name: str, typed: list[str]) -> bool:
    """Whether ``typed`` occurs in ``name`` as a run of whole words."""
    words = _words(name)
    size = len(typed)
    return size > 0 and any(words[i : i + size] == typed for i in range(len(words) - size + 1))


def match_gpu(typed: str, known: Iterable[str]) -> GpuMatch:
    """The product of ``known`` that ``typed`` names, or the candidates when it names several."""
    names = sorted(set(known))
    wanted = typed.strip().lower()
    if not wanted:
        return GpuMatch(typed, None, (), "none")
    rules: list[tuple[str, list[str]]] = [
        ("exact", [n for n in names if n.lower() == wanted]),
        (
            "alias",
            [n for n in names if any(_has_words(n, _words(w)) for w in ALIASES.get(wanted, ()))],
        ),
        ("words", [n for n in names if _has_words(n, _words(wanted))]),
        ("part", [n for n in names if wanted in n.lower()]),
    ]
    for rule, found in rules:
        if len(found) == 1:
            return GpuMatch(typed, found[0], tuple(found), rule)
        if found:
            return GpuMatch(typed, None, tuple(found), rule)
    return GpuMatch(typed, None, (), "none")
