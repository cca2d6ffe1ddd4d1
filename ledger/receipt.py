"""The old name of ``ledger.logged_event.LoggedEvent``, for callers outside ``ledger`` until
they import that name (one ``Receipt`` in the code base: the HTTP reply's)."""

from __future__ import annotations

from ledger.logged_event import LoggedEvent

__all__ = ["Receipt"]

Receipt = LoggedEvent
