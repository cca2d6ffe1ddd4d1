"""A run's manifests from its stored ingestion and attachments alone, on any door
(``ledger.store.read_door``): ``Ledger.run_manifests`` on its session's connection, a short
command on its driver's (issue 33: a run's record compares it with its group's #1). Its
attestations, however many anyone appended, are neither read nor decoded.

Loads no SQLAlchemy and no eventsourcing: the stored fields are read as the ledger's mapper
reads them (``ledger.store.stored_events.stored_fields``: a record the mapper would refuse
is refused here too), not through the aggregates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from domain.manifests.manifest_set import with_attached
from ledger.errors import CorruptRecordError
from ledger.ids import topic_of
from ledger.signing.dsse import stored_statement
from ledger.store.read_door import Rows
from ledger.store.stored_events import stored_fields, topic_records

INGESTED = topic_of("Run.Ingested")
# The stored topics of the events a run's manifests come from (``run_manifests`` readers
# read these alone).
MANIFEST_TOPICS = (INGESTED, topic_of("Run.ManifestsAttached"))


def run_manifests(
    ingestion_envelope: dict[str, Any], attached: Mapping[str, Any]
) -> dict[str, Any]:
    """A run's manifests from its ingestion's envelope and the manifests attached since (by
    role): what ``Run.manifests`` gives, for a reader that decodes only those events
    (``stored_run_manifests``) rather than every attestation of the run."""
    ingested = stored_statement(ingestion_envelope)["predicate"]["manifests"]
    return with_attached(ingested, attached)


def stored_run_manifests(rows: Rows, aggregate_id: UUID) -> dict[str, Any] | None:
    """The run's manifests (None: no such run). Fails closed as a replay would: on an event
    that does not decode, and on a record that does not start with its one ingestion at
    version 1."""
    ingestion: dict[str, Any] | None = None
    attached: dict[str, Any] = {}
    for record in topic_records(rows, aggregate_id, MANIFEST_TOPICS):
        if record.topic == INGESTED and ingestion is None and record.version == 1:
            ingestion = _fields(aggregate_id, record.state)["envelope"]
            ingested_manifests(aggregate_id, ingestion)
        elif ingestion is not None and record.topic != INGESTED:
            fields = _fields(aggregate_id, record.state)
            try:
                given = stored_statement(fields["envelope"])["predicate"]["manifests"]
                attached.update({role: given[role] for role in fields["roles"]})
            except (ValueError, KeyError, TypeError):
                raise _undecodable(aggregate_id) from None
        else:
            raise CorruptRecordError(
                f"stored events of {aggregate_id} do not start with its one ingestion; "
                "run 'kernelindex history' or 'kernelindex audit' to see which"
            )
    return None if ingestion is None else run_manifests(ingestion, attached)


def ingested_manifests(aggregate_id: UUID, envelope: dict[str, Any]) -> dict[str, Any]:
    """The manifests a run's stored ingestion envelope carries (before any attachment)."""
    try:
        manifests: dict[str, Any] = stored_statement(envelope)["predicate"]["manifests"]
    except (ValueError, KeyError, TypeError):
        raise _undecodable(aggregate_id) from None
    if not isinstance(manifests, dict):
        raise _undecodable(aggregate_id)
    return manifests


def ingestion_envelope(aggregate_id: UUID, state: bytes) -> dict[str, Any]:
    """The envelope of a run's stored ingestion (its state as the database holds it)."""
    return dict(_fields(aggregate_id, state)["envelope"])


def _fields(aggregate_id: UUID, state: bytes) -> dict[str, Any]:
    try:
        found = stored_fields(state)
    except (ValueError, RecursionError):
        raise _undecodable(aggregate_id) from None
    if not isinstance(found, dict) or not isinstance(found.get("envelope"), dict):
        raise _undecodable(aggregate_id)
    return found


def _undecodable(aggregate_id: UUID) -> CorruptRecordError:
    # Fail closed: nothing is read from a run whose stored events no longer decode. History
    # and audit say which is damaged.
    return CorruptRecordError(
        f"stored events of {aggregate_id} cannot be decoded; run 'kernelindex "
        "history' or 'kernelindex audit' to see which"
    )
