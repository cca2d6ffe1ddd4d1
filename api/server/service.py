"""The server's name for the service (``api.service.ledger_service``), kept for the HTTP
benchmark's instrumentation (``benchmarks/http/spans.py`` wraps its write methods here)."""

from __future__ import annotations

from api.service.ledger_service import LedgerService

__all__ = ["LedgerService"]
