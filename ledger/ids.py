"""Aggregate ids, derived from content: the same run or key always lands in the same aggregate.

Pure (no eventsourcing import), so offline verifiers can map events to runs and keys.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from uuid import NAMESPACE_URL, UUID, SafeUUID, uuid5

from domain.event_names import EventName

LEDGER_NAMESPACE = uuid5(NAMESPACE_URL, "https://kernelindex.dev/ledger/v1")


# uuid5's variant and version bits (RFC 4122 §4.1.1, §4.1.3), as ``UUID(version=5)`` sets them.
_KEEP = ~((0xC000 << 48) | (0xF000 << 64))
_VARIANT_AND_VERSION = (0x8000 << 48) | (5 << 76)
_RUN = LEDGER_NAMESPACE.bytes + b"run:"
_KEY = LEDGER_NAMESPACE.bytes + b"key:"


def _uuid5(prefix: bytes, name: str) -> UUID:
    """``uuid5(LEDGER_NAMESPACE, tag + name)`` for ``prefix`` = the namespace's bytes and the
    tag: the same SHA-1 and bits, without ``uuid5``'s import statement and ``UUID.__init__``'s
    keyword checks (~30 k instructions a new run under callgrind, this ~12 k; every ingestion
    of a new run asks once). Property-tested against ``uuid5`` (tests/ledger/test_ids.py)."""
    digest = hashlib.sha1(prefix + name.encode("utf-8"), usedforsecurity=False).digest()
    return uuid_of_int((int.from_bytes(digest[:16]) & _KEEP) | _VARIANT_AND_VERSION)


def uuid_of_int(value: int) -> UUID:
    """``UUID(int=value)`` for ``0 <= value < 2**128`` (the caller's to hold), without
    ``UUID.__init__``'s keyword checks: the same slots (``int``, ``is_safe`` unknown)."""
    made = object.__new__(UUID)
    object.__setattr__(made, "int", value)
    object.__setattr__(made, "is_safe", SafeUUID.unknown)
    return made


# Memoised: a write asks for its run's and signer's ids several times, and a uuid5 (a SHA-1
# and a UUID object) costs more than the lookup.
@lru_cache(maxsize=65_536)
def run_id(run_digest: str) -> UUID:
    return _uuid5(_RUN, run_digest)


@lru_cache(maxsize=4096)
def principal_id(key_id: str) -> UUID:
    return _uuid5(_KEY, key_id)


# The module eventsourcing stores the aggregates' events under (their topic's prefix): the
# aggregates define their classes there (tests/ledger/test_event_names.py holds it so).
AGGREGATES_MODULE = "ledger.aggregates"


def topic_of(event: str) -> str:
    """The topic eventsourcing stores an event class under (``"Run.Attested"`` →
    ``"ledger.aggregates:Run.Attested"``): queries by event class go through this."""
    return f"{AGGREGATES_MODULE}:{event}"


# Every event class that can change what a run is: all but its attestations, which anyone
# may add and which never change evidence or rank. Bounded by what admins and agents sign.
# Derived, so a run event added to ``EventName`` is a state event unless it is an attestation.
STATE_EVENTS = tuple(
    name for name in EventName if name.startswith("Run.") and name is not EventName.RUN_ATTESTED
)
STATE_TOPICS = tuple(topic_of(name) for name in STATE_EVENTS)
