"""A key's state folded from its stored events: the one fold admission, the ledger's key
reads and a command reading through the driver alone (``api.service.key_pages``, issue 33)
all use.

Imports no aggregate or eventsourcing class: a short command folds keys without them.
KeyPredicate, a model made on first use (``domain.statements``), is imported by the function
that needs it: a process that never checks a statement never makes the models.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain.timestamps import parse_time
from ledger.authority import KeyBook, KeyState
from ledger.errors import CorruptRecordError
from ledger.store.stored_events import StoredRecord, decode_stored


def fold_key_events(key_id: str, records: Sequence[StoredRecord]) -> KeyState | None:
    """A key's state from its stored events, in order (``ledger.authority.KeyBook``).
    A record that no longer decodes fails closed."""
    from domain.statements import KeyPredicate, validate_part  # noqa: PLC0415 - see the imports

    book = KeyBook()
    for record in records:
        try:
            stored, statement = decode_stored(record.state)
            predicate = validate_part(KeyPredicate, statement["predicate"])
            received = parse_time(str(stored["received_at"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecordError(
                f"stored key event at position {record.position} of {key_id} cannot be read "
                f"({type(exc).__name__})"
            ) from None
        book.learn(
            predicate,
            position=record.position,
            received_at=received,
            signer=str(stored.get("signer", "")),
        )
    return book(key_id)
