"""Database connections that survive the database dropping them."""

from __future__ import annotations

import weakref
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DisconnectionError

_PINGED: weakref.WeakSet[Engine] = weakref.WeakSet()


def ping_on_checkout(engine: Engine) -> None:
    """Test each pooled connection as it is taken (SQLAlchemy's pre-ping, on an engine made
    without it), so one the database dropped while idle (restart, pg_terminate_backend,
    failover) is replaced instead of failing the next request. A file database (SQLite)
    cannot drop a connection: nothing to do there."""
    if engine.dialect.name == "sqlite" or engine in _PINGED:
        return
    _PINGED.add(engine)  # one listener per engine, however many services share it
    dialect = engine.dialect

    def ping(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        try:
            alive = dialect.do_ping(dbapi_connection)
        except Exception:
            alive = False
        if not alive:
            raise DisconnectionError("pooled connection is gone; the pool opens a new one")

    event.listen(engine, "checkout", ping)
