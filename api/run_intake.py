"""A run and the manifests it names, completed from what the ledger holds.

A run names its implementation and workload by digest; a leaderboard import often carries
only the digests. An ingestion takes the ones it lacks from the ledger (any admitted
event's manifest, by that digest), so a run ingested after the catalog lands in its
comparison group; a run ingested before them is given them later by a signed attachment.
Neither changes a run's evidence level. The CLI and the demo both go through here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.manifests.manifest_set import (
    ATTACHABLE_MEMBERS,
    check_manifest_set,
    lacking_references,
)
from ledger.aggregates import RunState
from ledger.application import Ledger
from ledger.errors import AlreadyExistsError, NotFoundError
from ledger.receipt import Receipt
from ledger.signing.authoring import attachment_envelope, ingestion_envelope
from ledger.signing.keys import SigningKey
from projections.queries import manifest_by_digest
from projections.runner import ProjectionRunner

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Intake:
    """What an ingestion or attachment appended, and the manifests it added by digest."""

    receipt: Receipt
    attached: bool  # True: the run existed and was attached what it lacked
    taken: dict[str, JsonObject] = field(default_factory=dict)


def held_manifests(ledger: Ledger, run: Mapping[str, Any], have: set[str]) -> dict[str, JsonObject]:
    """The attachable manifests ``run`` names by digest, lacks, and the ledger holds."""
    wanted = lacking_references(run, have)
    if not wanted:
        return {}
    runner = ProjectionRunner(ledger)
    runner.catch_up()  # SQLite has no subscription: fold what is new before reading
    _, found = runner.snapshot(
        lambda session: {role: manifest_by_digest(session, d) for role, d in wanted.items()}
    )
    return {role: document for role, document in found.items() if document is not None}


def attach_lacking(
    ledger: Ledger,
    run_digest: str,
    key: SigningKey,
    supplied: Mapping[str, JsonObject],
    stored: RunState | None = None,
) -> Intake | None:
    """Append an attachment of what the run lacks (from ``supplied``, else the ledger);
    None when there is nothing to attach. ``stored``: the run, if the caller loaded it."""
    stored = stored or ledger.run_state(run_digest)
    if stored is None:
        raise NotFoundError(f"no run with digest {run_digest}")
    current = stored.manifests()
    lacking = {
        role: dict(document)
        for role, document in supplied.items()
        if role in ATTACHABLE_MEMBERS and role not in current
    }
    lacking |= held_manifests(ledger, current["run"], set(current) | set(lacking))
    if not lacking:
        return None
    envelope = attachment_envelope(run_digest, stored.run_name, lacking, key)
    return Intake(ledger.append(envelope), attached=True, taken=lacking)


def ingest_run(
    ledger: Ledger,
    manifests: dict[str, JsonObject],
    key: SigningKey,
    *,
    source: str | None = None,
    external_id: str | None = None,
    snapshot_digest: str | None = None,
) -> Intake:
    """Ingest a run, with the manifests it names taken from the ledger where ``manifests``
    lacks them; a run already ingested is attached what it lacks instead (an
    :class:`AlreadyExistsError` when it lacks nothing either has)."""
    checked = check_manifest_set(manifests)  # a clear error before anything is read
    if (existing := ledger.run_state(checked.run_digest)) is not None:
        attached = attach_lacking(ledger, checked.run_digest, key, manifests, existing)
        if attached is None:
            raise AlreadyExistsError(
                f"run {checked.run_digest} is already ingested, with every manifest it names "
                "that the file or the ledger holds"
            )
        return attached
    taken = held_manifests(ledger, checked.run, set(manifests))
    envelope = ingestion_envelope(
        manifests | taken,
        key,
        source=source,
        external_id=external_id,
        snapshot_digest=snapshot_digest,
    )
    return Intake(ledger.append(envelope), attached=False, taken=taken)
