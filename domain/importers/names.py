"""Metadata names and titles, written the way KernelIndex writes them (every importer).

Metadata is cut to the schemas' lengths rather than rejected: a long title is no reason to
lose a result.
"""

from __future__ import annotations

import re
from typing import Final

MAX_NAME: Final = 100  # the catalog truncates object names to 100 characters
MAX_TITLE: Final = 200
MAX_DESCRIPTION: Final = 2000


def slug(value: str) -> str:
    """``"NVIDIA B200"`` → ``"nvidia-b200"``; ``"2.8.0+cu128"`` → ``"2-8-0-cu128"``."""
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")


def clip(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters, the last one an ellipsis when cut."""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def object_name(*parts: str) -> str:
    """A catalog metadata name: the slugs of ``parts`` joined by ``-``, at most 100 characters."""
    joined = "-".join(p for p in (slug(part) for part in parts) if p)[:MAX_NAME].rstrip("-.")
    return joined or "unnamed"
