"""The log's signing key as a ledger holds it: in hand, or read from its file when first used.

A ledger that writes signs a checkpoint in every commit and holds its key from the start. A
reader signs only a checkpoint no commit stored (``TransparencyLog.checkpoint``: an empty
log, a size inside a commit), which most never meet: reading its key file (and decrypting
it, with cryptography's key-file formats) then waits for that first signature, so a read
command does not pay for it at start-up (issue 33).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from domain.errors import DomainError
from ledger.signing.keys import PublicKey, SigningKey


def require_log_key(key: SigningKey, expected: PublicKey) -> SigningKey:
    """``key``, if it is the log key the trust root names; else refuse."""
    if key.key_id != expected.key_id:
        raise DomainError("the log key given is not the trust root's log key")
    return key


class DeferredKey:
    """A log key read by ``load`` (e.g. from the home's ``keys/log.pem``) the first time it is
    asked for, checked against the trust root's then, and kept."""

    def __init__(self, load: Callable[[], SigningKey], expected: PublicKey) -> None:
        self._load = load
        self._expected = expected
        self._key: SigningKey | None = None
        self._lock = threading.Lock()  # a server's reader threads may ask at once

    def get(self) -> SigningKey:
        with self._lock:
            if self._key is None:
                self._key = require_log_key(self._load(), self._expected)
            return self._key
