"""Aggregate ids, derived from content: the same run or key always lands in the same aggregate.

Pure (no eventsourcing import), so offline verifiers can map events to runs and keys.
"""

from __future__ import annotations

from uuid import NAMESPACE_URL, UUID, uuid5

LEDGER_NAMESPACE = uuid5(NAMESPACE_URL, "https://kernelindex.dev/ledger/v1")


def run_id(run_digest: str) -> UUID:
    return uuid5(LEDGER_NAMESPACE, "run:" + run_digest)


def principal_id(key_id: str) -> UUID:
    return uuid5(LEDGER_NAMESPACE, "key:" + key_id)
