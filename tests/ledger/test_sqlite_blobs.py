"""``blob_param``: bytes bound to SQLite as a ``bytearray`` (no adapter lookup per value)
store, compare and read back exactly as the same ``bytes`` bound as they are."""

from __future__ import annotations

import sqlite3
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ledger.store.sqlite_blobs import blob_param


def _stored(value: Any) -> tuple[Any, str, int]:
    """What SQLite holds of ``value`` bound to a BLOB column: the value read back, its
    storage class, and whether the same bytes bound plainly find the row (a key lookup)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (k BLOB PRIMARY KEY, v BLOB NOT NULL)")
    db.executemany("INSERT INTO t (k, v) VALUES (?, ?)", [(value, value)])
    got, kind = db.execute("SELECT v, typeof(v) FROM t").fetchone()
    plain = bytes(value) if isinstance(value, bytearray | bytes) else value
    found = db.execute("SELECT count(*) FROM t WHERE k = ?", (plain,)).fetchone()[0]
    db.close()
    return got, kind, found


@given(st.binary(max_size=5000))
def test_a_blob_param_is_stored_as_its_bytes(value: bytes) -> None:
    bound = blob_param("sqlite", value)
    assert type(bound) is bytearray  # the driver binds it without its adapter protocol
    assert _stored(bound) == _stored(value) == (value, "blob", 1)
    assert type(_stored(bound)[0]) is bytes  # read back as bytes, not the bound bytearray


@given(st.one_of(st.binary(max_size=64), st.integers(), st.text(max_size=20), st.none()))
def test_other_values_and_other_dialects_are_bound_as_they_are(value: Any) -> None:
    assert blob_param("postgresql", value) is value
    if type(value) is not bytes:
        assert blob_param("sqlite", value) is value
