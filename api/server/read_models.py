"""Row-to-document mappers the service reads through, and the cursor of paged lists.

The documents are the JSON-ready read models the service answers with; the HTML pages read
several of them as they are, and the API turns them into its typed replies
(``api.server.responses``).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

from domain.documents import MAX_SAFE_INTEGER
from ledger.errors import NotFoundError
from ledger.event_verification import EventVerification
from ledger.history import HistoryPage, describe
from projections.rows import BoardRow, RunListRow

_CURSOR = re.compile(r"p(0|[1-9][0-9]{0,15})")


@dataclass(frozen=True)
class Cursor:
    """Runs are listed in ingestion order; the cursor is the last position a page held."""

    after: int

    def encode(self) -> str:
        return base64.urlsafe_b64encode(f"p{self.after}".encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> Cursor:
        """Only the exact tokens ``encode`` makes: ASCII digits, no leading zeros, a position
        the log can have (a bigger one would overflow the database's integer: a 500)."""
        try:
            text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
            if not _CURSOR.fullmatch(text) or int(text[1:]) > MAX_SAFE_INTEGER:
                raise ValueError(text)
            cursor = cls(int(text[1:]))
            if cursor.encode() != token:
                raise ValueError(token)
            return cursor
        except (ValueError, UnicodeDecodeError):
            raise NotFoundError(f"cursor {token!r} is not one this API issued") from None


def history_entry(
    entry: EventVerification, leaf_index: int | None, changed: dict[str, Any] | None = None
) -> dict[str, Any]:
    return entry.to_json() | {"says": describe(entry), "leafIndex": leaf_index, "changed": changed}


def page_fields(page: HistoryPage) -> dict[str, Any]:
    return {"start": page.start, "next": page.next_start, "total": page.total}


def run_item(row: RunListRow) -> dict[str, Any]:
    return {
        "digest": row.run_digest,
        "name": row.name,
        "title": row.title,
        "source": row.source,
        "externalId": row.external_id,
        "benchmark": row.benchmark,
        "status": row.status,
        "comparisonKey": row.comparison_key,
        "metric": row.metric,
        "claimed": row.claimed,
        "unit": row.unit,
        "gpu": row.product,
        "evidenceLevel": row.evidence_level,
        "retracted": bool(row.retracted),
        "supersededBy": row.superseded_by,
        "attestations": row.attestations,
        "ingestedAt": row.ingested_at,
        "position": row.ingested_position,
    }


def board_entry(row: BoardRow, first: float | None) -> dict[str, Any]:
    return {
        "rank": row.rank,
        "of": row.of_count,
        "run": row.run_digest,
        "name": row.name,
        "title": row.title,
        "source": row.source,
        "externalId": row.external_id,
        "evidenceLevel": row.evidence_level,
        "value": row.value,
        "unit": row.unit,
        "metric": row.metric,
        "statistic": row.statistic,
        "claimed": row.claimed,
        "rerunMedianNs": row.rerun_median_ns,
        "author": row.author,
        "tiedWith": row.tied_runs,
        "ratioToFirst": row.value / first if first else None,
    }
