"""Aggregate ids, derived from content: the same run or key always lands in the same aggregate.

Pure (no eventsourcing import), so offline verifiers can map events to runs and keys.
"""

from __future__ import annotations

from functools import lru_cache
from uuid import NAMESPACE_URL, UUID, uuid5

from domain.event_names import EventName

LEDGER_NAMESPACE = uuid5(NAMESPACE_URL, "https://kernelindex.dev/ledger/v1")


# Memoised: a write asks for its run's and signer's ids several times, and uuid5 (a SHA-1 and
# a UUID object) costs more than the lookup.
@lru_cache(maxsize=65_536)
def run_id(run_digest: str) -> UUID:
    return uuid5(LEDGER_NAMESPACE, "run:" + run_digest)


@lru_cache(maxsize=4096)
def principal_id(key_id: str) -> UUID:
    return uuid5(LEDGER_NAMESPACE, "key:" + key_id)


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
