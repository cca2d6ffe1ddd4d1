"""Numbers, times, artifacts and manifests in the form the KernelIndex catalog writes them.

Shared by the importers whose records must digest like the catalog's copies of the same
results (FlashInfer-Bench, GPU MODE KernelBot, the catalog export itself).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from domain.canonical import canonical_json
from domain.expressions import MAX_SAFE_INTEGER
from domain.importers.fields import MappingError, text
from domain.importers.records import Artifact, ImportRecord
from domain.manifests.kinds import API_VERSION
from domain.manifests.manifest_set import check_manifest_set
from domain.timestamps import format_time

_MEDIA_TYPES: Final[Mapping[str, str]] = {
    ".py": "text/x-python",
    ".cu": "text/x-cuda",
    ".cuh": "text/x-cuda",
    ".cpp": "text/x-c++src",
    ".cc": "text/x-c++src",
    ".h": "text/x-c",
    ".hpp": "text/x-c++hdr",
}


def js_round(value: float) -> int:
    """JavaScript's ``Math.round`` (halves round up), exact for every double."""
    if not math.isfinite(value) or abs(value) > MAX_SAFE_INTEGER:
        raise MappingError(f"{value!r} is out of range for a whole number of ns")
    floor = math.floor(value)
    return int(floor) + 1 if value - floor >= 0.5 else int(floor)


def latency_ns(milliseconds: float) -> int:
    """round(ms · 10⁶) computed as KernelIndex does (a double product, then Math.round)."""
    return js_round(milliseconds * 1e6)


def utc_millis(value: object, where: str) -> str:
    """An ISO 8601 time as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC, truncated to milliseconds).

    This is what JavaScript's ``new Date(s).toISOString()`` gives; a time without an offset
    is taken as UTC.
    """
    raw = text(value, where)
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        parsed = parsed.astimezone(UTC)
    except (ValueError, OverflowError):  # OverflowError: an offset that leaves years 1-9999
        raise MappingError(f"{where}: {raw!r} is not an ISO 8601 time") from None
    return format_time(parsed)  # toISOString's form: four-digit year, milliseconds, Z


def sorted_unique(values: Iterable[str]) -> list[str]:
    """Sorted as the canonical form sorts set-like lists (UTF-16 code units)."""
    return sorted(set(values), key=lambda item: item.encode("utf-16-be"))


def manifest(kind: str, metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def json_artifact(value: object, name: str) -> Artifact:
    """The canonical JSON bytes of a source record, kept by digest."""
    return Artifact(canonical_json(value), "application/json", name)


def file_artifact(content: bytes, path: str) -> Artifact:
    """A source file kept by digest, its media type told by its suffix."""
    suffix = path[path.rfind(".") :].lower() if "." in path else ""
    return Artifact(content, _MEDIA_TYPES.get(suffix, "text/plain"), path)


def checked(record: ImportRecord) -> ImportRecord:
    """The record, once its manifest set validates and its digests agree (else raises)."""
    check_manifest_set(record.manifests)
    return record
