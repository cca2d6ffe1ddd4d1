"""Who may sign what: the one authorization rule of the ledger.

Admission (``ledger.application``), ``history``, ``audit``, the server's history and the
offline bundle verifier all decide through :func:`authorize`, so an envelope the ledger
admits is judged the same way whenever, and by whomever, it is re-verified.

Pure: no storage. Callers hand it the key book as the log stood at the event's place in it.
"""

from ledger.authority.content import check_ingestion, check_timely
from ledger.authority.key_book import KeyBook, KeyLookup, KeyState
from ledger.authority.signers import (
    Authorization,
    LogPoint,
    authorize,
    check_key_statement,
    quantize,
    signed_or_vouched,
)

__all__ = [
    "Authorization",
    "KeyBook",
    "KeyLookup",
    "KeyState",
    "LogPoint",
    "authorize",
    "check_ingestion",
    "check_key_statement",
    "check_timely",
    "quantize",
    "signed_or_vouched",
]
