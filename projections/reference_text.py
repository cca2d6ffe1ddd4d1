"""What a typed reference looks like as text (``projections.references``,
``projections.view_reads``): pure, so a read through the driver needs no query module."""

from __future__ import annotations

import re

MIN_PREFIX = 4
_HEX = re.compile(r"[0-9a-f]+")
SHOWN = 8  # candidates listed in an ambiguity error


def full_digest(reference: str) -> str | None:
    """``sha256:<64 hex>`` when ``reference`` is a whole digest (any case), else None."""
    hexpart = reference.strip().lower().removeprefix("sha256:")
    return "sha256:" + hexpart if len(hexpart) == 64 and _HEX.fullmatch(hexpart) else None


def digest_prefix(reference: str) -> str | None:
    hexpart = reference.strip().lower().removeprefix("sha256:")
    if len(hexpart) >= MIN_PREFIX and _HEX.fullmatch(hexpart):
        return "sha256:" + hexpart
    return None
