"""Why the ledger refused a write. Each refusal appends nothing.

``code`` is stable: the CLI prints it and the HTTP API uses it as the problem+json type.
``status`` is the HTTP status the API answers with.
"""

from __future__ import annotations

from domain.errors import DomainError


class AdmissionError(DomainError):
    code = "rejected"
    status = 422


class UnknownKeyError(AdmissionError):
    code = "unknown-key"
    status = 403


class RevokedKeyError(AdmissionError):
    code = "revoked-key"
    status = 403


class ExpiredKeyError(AdmissionError):
    code = "expired-key"
    status = 403


class WrongRoleError(AdmissionError):
    code = "wrong-role"
    status = 403


class ClockSkewError(AdmissionError):
    code = "bad-timestamp"
    status = 422


class SubjectMismatchError(AdmissionError):
    code = "subject-mismatch"
    status = 422


class UnknownRunError(AdmissionError):
    code = "unknown-run"
    status = 404


class RerunJobError(AdmissionError):
    """A rerun result that does not answer an open job exactly (nonce, expiry, hardware)."""

    code = "rerun-rejected"
    status = 422


class AlreadyExistsError(AdmissionError):
    """The run or key exists already, from a different envelope."""

    code = "already-exists"
    status = 409

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class ConflictError(AdmissionError):
    """Optimistic concurrency retries were exhausted; the client may try again."""

    code = "conflict"
    status = 409


class LogIntegrityError(DomainError):
    """The stored log disagrees with itself; the ledger stops rather than sign over it."""

    code = "log-integrity"
    status = 500


class NotFoundError(DomainError):
    code = "not-found"
    status = 404


class AmbiguousReferenceError(DomainError):
    code = "ambiguous-reference"
    status = 400


class CorruptRecordError(DomainError):
    """A stored event no longer decodes: the store was damaged or tampered with."""

    code = "corrupt-record"
    status = 500


class UnprocessableEnvelopeError(DomainError):
    """Reading or judging one envelope failed in a way no rule names: a bug of the
    ledger's, logged with its traceback. The envelope is refused and nothing of it stored;
    the rest of its group is not affected. Not "malformed": the envelope may be sound."""

    code = "unprocessable-envelope"
    status = 422


class StoreError(DomainError):
    """The database failed or refused a request. A write refused this way stored nothing:
    its transaction rolled back whole (events and their log leaves commit together)."""

    code = "store-unavailable"
    status = 503


class StoreFullError(StoreError):
    code = "store-full"
    status = 507


class ReadOnlyStoreError(StoreError):
    code = "read-only-store"
    status = 503


# SQLite primary result codes (the low byte of an extended code).
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR = 5, 6, 8, 10
_SQLITE_FULL, _SQLITE_CANTOPEN = 13, 14
# PostgreSQL SQLSTATEs: retry (another transaction won), or refusals that a retry cannot fix.
_PG_RETRY = {"40001", "40P01", "55P03"}  # serialization failure, deadlock, lock not available
_PG_FULL = {"53100", "53200"}  # disk full, out of memory
_PG_READ_ONLY = {"25006"}  # read-only transaction (a hot standby, default_transaction_read_only)
_NOTHING_STORED = "nothing was stored"
# Failures of the database or the way to it, as the driver, SQLAlchemy or eventsourcing name
# them; other database exceptions (ProgrammingError, DataError...) are bugs, not outages.
_OPERATIONAL = {"OperationalError", "InterfaceError", "TimeoutError", "DisconnectionError"}


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception, what it wraps (eventsourcing → SQLAlchemy → the driver's own)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        orig = getattr(current, "orig", None)
        current = (
            orig if isinstance(orig, BaseException) else (current.__cause__ or current.__context__)
        )
    return seen


def _is_store_failure(exc: BaseException) -> bool:
    module = type(exc).__module__.split(".")[0]
    return module in {"sqlalchemy", "eventsourcing", "sqlite3", "psycopg", "psycopg2"}


def _sqlite_code(chain: list[BaseException]) -> int | None:
    for exc in chain:
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF
    return None


def _sqlstate(chain: list[BaseException]) -> str | None:
    for exc in chain:
        state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
        if isinstance(state, str):
            return state
    return None


def _disconnected(chain: list[BaseException]) -> bool:
    return any(getattr(exc, "connection_invalidated", False) for exc in chain)


def is_store_failure(exc: BaseException) -> bool:
    """Whether the database (or its driver, or eventsourcing's layer over it) failed
    somewhere in what ``exc`` wraps: an outage ``store_error`` names, or one it does not
    (a damaged file, a missing table, an aborted transaction)."""
    return any(_is_store_failure(e) for e in _chain(exc))


def store_error(exc: BaseException) -> StoreError | None:
    """The refusal a database failure means to a client (None: ``exc`` is not one).

    The message says what happened and that nothing was stored; the driver's own text (SQL,
    parameters) stays in the server's log."""
    if not is_store_failure(exc):
        return None
    chain = _chain(exc)
    sqlite, state = _sqlite_code(chain), _sqlstate(chain)
    if sqlite == _SQLITE_FULL or state in _PG_FULL:
        return StoreFullError(f"the database is full: the write was refused and {_NOTHING_STORED}")
    if sqlite == _SQLITE_READONLY or state in _PG_READ_ONLY:
        return ReadOnlyStoreError(
            f"the database is read-only: the write was refused and {_NOTHING_STORED}; "
            "reads still work"
        )
    if sqlite == _SQLITE_IOERR:
        return StoreError(
            f"the database could not write its file (disk I/O error); {_NOTHING_STORED}"
        )
    if sqlite == _SQLITE_CANTOPEN:
        return StoreError("the database file cannot be opened")
    if _disconnected(chain) or (state is not None and state.startswith(("08", "57P"))):
        # Lost during COMMIT, the outcome is unknown to us; resending is safe because an
        # envelope already stored is answered with its original receipt.
        return StoreError(
            "the connection to the database was lost; send the same envelope again: if it "
            "was stored, the ledger answers with its original receipt"
        )
    if any(type(e).__name__ in _OPERATIONAL for e in chain):
        return StoreError(f"the database failed the request; {_NOTHING_STORED} by it")
    return None  # a programming error (bad SQL, wrong use of the library): a bug, loudly


# A unique or primary key taken: SQLite extended codes, PostgreSQL unique_violation.
_SQLITE_KEY_TAKEN = {1555, 2067}  # SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE
_PG_KEY_TAKEN = "23505"


def _sqlite_extended(chain: list[BaseException]) -> int | None:
    for exc in chain:
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code
    return None


def _lost_a_race(chain: list[BaseException]) -> bool:
    """Another writer got there first: a unique key taken (the same aggregate version, the
    same leaf), SQLite busy or locked, a PostgreSQL serialization failure, deadlock or lock
    timeout. Other integrity violations (NOT NULL, CHECK, foreign keys) are bugs: retrying
    cannot help, and calling them a conflict would send clients into a loop."""
    extended, state = _sqlite_extended(chain), _sqlstate(chain)
    if extended is not None:
        return extended in _SQLITE_KEY_TAKEN or extended & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    if state is not None:
        return state == _PG_KEY_TAKEN or state in _PG_RETRY
    # No driver error underneath: the library's own optimistic-concurrency refusal.
    return any(type(e).__name__ == "IntegrityError" for e in chain)


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the same write may succeed: another writer won the race, or the
    connection dropped (the retry takes a fresh one). A full, read-only or failing store
    refuses every retry alike."""
    chain = _chain(exc)
    if _lost_a_race(chain):
        return True
    state = _sqlstate(chain)
    if _sqlite_code(chain) is None and state is not None and state.startswith(("08", "57P")):
        return True
    return _disconnected(chain)


def write_refusal(exc: BaseException, attempts: int, outcome_unknown: bool = False) -> DomainError:
    """What the client of a write hears when the store did not take it (after ``attempts``
    tries): a conflict to retry if other writers kept winning, else the store's refusal.

    ``outcome_unknown``: an earlier attempt lost its connection, perhaps during COMMIT, so
    the write may be stored; the client is told to resend (a stored envelope comes back with
    its original receipt), never that nothing was stored."""
    if outcome_unknown:
        return StoreError(
            "the connection to the database was lost during the write and the database is "
            "still failing; send the same envelope again once it answers: if it was stored, "
            "the ledger answers with its original receipt"
        )
    if _lost_a_race(_chain(exc)):
        return ConflictError(f"could not append after {attempts} attempts; try again")
    return store_error(exc) or StoreError(f"the database failed the write; {_NOTHING_STORED}")


def lost_connection(exc: BaseException) -> bool:
    """The connection dropped: whatever was in flight (a COMMIT included) has an unknown
    outcome."""
    chain = _chain(exc)
    state = _sqlstate(chain)
    if _sqlite_code(chain) is None and state is not None and state.startswith(("08", "57P")):
        return True
    return _disconnected(chain)


def is_outage(exc: BaseException) -> bool:
    """Worth waiting out in a background process: a lost race, a dropped connection, or a
    database that does not answer (restarting, failing over). Not a missing table or bad
    SQL: those need an operator, and retrying them forever would hide it."""
    if is_transient(exc):
        return True
    chain = _chain(exc)
    if _sqlite_code(chain) is not None:
        return False
    state = _sqlstate(chain)
    if state is not None:
        return state.startswith(("08", "57P"))
    # No SQLSTATE: the driver could not reach the server at all (connection refused).
    return any(type(e).__name__ == "OperationalError" for e in chain)
