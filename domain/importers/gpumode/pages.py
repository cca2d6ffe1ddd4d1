"""A page of the KernelBot dataset as the Hugging Face datasets server returns it.

``{"rows": [{"row": {...}, "truncated_cells": [...]}, ...]}`` or a bare list of rows; the
leaderboard table (``leaderboards.json``) is such a page too, and names leaderboard ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.documents import parse_json
from domain.importers.fields import MappingError, as_object, integer, text


@dataclass(frozen=True)
class Leaderboard:
    """One row of the dataset's leaderboard table."""

    id: int
    name: str
    gpu_types: tuple[str, ...]
    row: Mapping[str, Any]


def rows(document: object, where: str) -> list[Any]:
    """The items of a page."""
    if isinstance(document, list):
        return document
    if isinstance(document, dict) and isinstance(document.get("rows"), list):
        return list(document["rows"])
    raise MappingError(f"{where}: expected {{'rows': [...]}} or a list of rows")


def unwrap(item: object, where: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """(row, truncated cells) of a datasets-server item or of a bare row."""
    body = as_object(item, where)
    if "row" in body and isinstance(body["row"], dict):
        truncated = body.get("truncated_cells") or []
        cells = tuple(str(c) for c in truncated) if isinstance(truncated, list) else ()
        return body["row"], cells
    return body, ()


def parse_leaderboards(data: bytes) -> dict[int, Leaderboard]:
    """The leaderboard table (``leaderboards.json``) by id; raises DomainError if malformed."""
    result: dict[int, Leaderboard] = {}
    for index, item in enumerate(rows(parse_json(data), "leaderboards")):
        row, _ = unwrap(item, f"leaderboards[{index}]")
        board_id = integer(row.get("id"), f"leaderboards[{index}].id")
        gpu_types = row.get("gpu_types") or []
        result[board_id] = Leaderboard(
            id=board_id,
            name=text(row.get("name"), f"leaderboards[{index}].name"),
            gpu_types=tuple(str(g) for g in gpu_types) if isinstance(gpu_types, list) else (),
            row=row,
        )
    return result
