"""Bytes bound for SQLite without the driver's adapter lookup per value.

``sqlite3`` binds an exact ``int``, ``float``, ``str`` or ``bytearray`` as it is; any other
value, ``bytes`` included, first goes through its adapter protocol (CPython's
``need_adapt``): a registry lookup and two failed attribute lookups per value, ~3,300
instructions each (callgrind, CPython 3.11), more than copying a 4 kB event state into a
``bytearray``. Both are bound as the same BLOB (``sqlite3_bind_blob`` of their buffer) and
read back as ``bytes``: the stored bytes are the same (``tests/ledger/test_sqlite_blobs.py``).
PostgreSQL's driver gets its values as they were.
"""

from __future__ import annotations

from typing import Any

__all__ = ["blob_param"]


def blob_param(dialect: str, value: Any) -> Any:
    """``value`` as the commit binds it on ``dialect``: exact ``bytes`` on SQLite as a
    ``bytearray``, anything else as it is."""
    return bytearray(value) if type(value) is bytes and dialect == "sqlite" else value
