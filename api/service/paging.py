"""Cursor pagination of the lists the service answers in pages (runs, keys)."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from domain.documents import MAX_SAFE_INTEGER
from ledger.errors import NotFoundError

MAX_PAGE = 200  # items per page of a cursor-paged list
_CURSOR = re.compile(r"p(0|[1-9][0-9]{0,15})")


@dataclass(frozen=True)
class Cursor:
    """Lists are in the order the log took their items in; the cursor is the last position
    (or registration number) a page held."""

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


def page_size(limit: int, most: int = MAX_PAGE) -> int:
    return max(1, min(limit, most))


def next_start(start: int, size: int, total: int) -> int | None:
    """Where the page after the ``size`` items from the ``start``-th (1-based) of ``total``
    starts, or None when that page was the last."""
    return start + size if start - 1 + size < total else None
