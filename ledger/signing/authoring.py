"""Building and signing the statements actors send to the ledger.

Clients (CLI, importers, the GPU agent) use these so that what they sign is exactly what the
ledger's admission checks expect.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, TypedDict, Unpack

import msgspec

from domain.manifests.manifest_set import check_claim, check_manifest_set
from domain.rerun_binding import DeviceClass, check_agent_registration
from domain.statements import PredicateType, Role, build_predicate, make_statement
from domain.timestamps import format_time, utc_now
from ledger.signing.dsse import sign_envelope
from ledger.signing.keys import PublicKey, SigningKey

# KeyPredicate, a model made on first use (domain.statements), is imported by the function
# that needs it: a process that never checks a statement never makes the models.


def _signed(
    subject_name: str,
    subject_digest: str,
    predicate_type: PredicateType,
    predicate: dict[str, Any],
    key: SigningKey,
) -> dict[str, Any]:
    """Sign a statement whose predicate is built (and so checked) through its domain model:
    a client cannot sign what the ledger's admission would refuse as malformed. The fields
    given are signed as given (plain JSON values: an enum as its string), never a default the
    client did not send."""
    build_predicate(predicate_type, predicate)
    fields = msgspec.to_builtins(predicate)
    return sign_envelope(make_statement(subject_name, subject_digest, predicate_type, fields), key)


def ingestion_envelope(  # noqa: PLR0913 - one parameter per field of the predicate
    manifests: dict[str, dict[str, Any]],
    key: SigningKey,
    *,
    source: str | None = None,
    external_id: str | None = None,
    fetched_at: datetime | None = None,
    snapshot_digest: str | None = None,
    now: datetime | None = None,
    published_at: datetime | None = None,
    source_name: str | None = None,
) -> dict[str, Any]:
    """An ingester-signed statement that a run (and the manifests it references) exists;
    ``published_at`` and ``source_name``: when the source published it and what the source
    calls itself, where the source states them."""
    checked = check_manifest_set(manifests)
    check_claim(checked.run)
    native = checked.run["spec"].get("sourceNative") or {}
    moment = now or utc_now()
    predicate: dict[str, Any] = {
        "source": source or native.get("source") or "direct",
        "fetchedAt": format_time(fetched_at or moment),
        "issuedAt": format_time(moment),
        # Signed as supplied: the ledger recomputes every digest from these documents.
        "manifests": manifests,
    }
    external = external_id or native.get("externalId")
    if external is not None:
        predicate["externalId"] = external
    if native:
        predicate["sourceNative"] = native
    if snapshot_digest is not None:
        predicate["snapshotDigest"] = snapshot_digest
    if published_at is not None:
        predicate["publishedAt"] = format_time(published_at)
    if source_name:
        predicate["sourceName"] = source_name
    return _signed(checked.run_name, checked.run_digest, PredicateType.INGESTION, predicate, key)


def attachment_envelope(
    run_digest: str,
    run_name: str,
    attached: dict[str, dict[str, Any]],
    key: SigningKey,
    *,
    now: datetime | None = None,
) -> dict[str, Any]:
    """An ingester-signed statement adding manifests a run names by digest but lacks."""
    predicate = {"issuedAt": format_time(now or utc_now()), "manifests": attached}
    return _signed(run_name, run_digest, PredicateType.ATTACHMENT, predicate, key)


class AttestationDetails(TypedDict, total=False):
    """The optional fields of an attestation; one given as None is left out, as is one not
    given."""

    evidence_url: str | None
    observed_ns: int | None
    environment_summary: str | None
    reason: str | None


# Keyword → predicate field, in the order they are written into the predicate.
_ATTESTATION_DETAILS = (
    ("evidence_url", "evidenceUrl"),
    ("observed_ns", "observedNs"),
    ("environment_summary", "environmentSummary"),
    ("reason", "reason"),
)


def attestation_envelope(
    run_digest: str,
    run_name: str,
    key: SigningKey,
    *,
    type_: str,
    body: str,
    now: datetime | None = None,
    **details: Unpack[AttestationDetails],
) -> dict[str, Any]:
    """An attester's note on a run: ``type_`` and ``body``, and the optional ``details``."""
    given: dict[str, object] = dict(details)
    _refuse_unknown("attestation_envelope", given, (name for name, _ in _ATTESTATION_DETAILS))
    predicate: dict[str, Any] = {
        "type": type_,
        "body": body,
        "issuedAt": format_time(now or utc_now()),
    }
    for name, field in _ATTESTATION_DETAILS:
        if (value := given.get(name)) is not None:
            predicate[field] = value
    return _signed(run_name, run_digest, PredicateType.ATTESTATION, predicate, key)


def _refuse_unknown(function: str, given: Mapping[str, object], known: Iterable[str]) -> None:
    """Keywords gathered in ``**`` are checked by the type checker only: refuse any other at
    run time too, as a plain keyword parameter list would."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")


def lifecycle_envelope(
    run_digest: str,
    run_name: str,
    key: SigningKey,
    *,
    action: str,
    reason: str,
    superseded_by: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    predicate: dict[str, Any] = {
        "action": action,
        "reason": reason,
        "issuedAt": format_time(now or utc_now()),
    }
    if superseded_by is not None:
        predicate["supersededBy"] = superseded_by
    return _signed(run_name, run_digest, PredicateType.LIFECYCLE, predicate, key)


def key_registration_envelope(
    subject: PublicKey,
    roles: list[Role],
    signer: SigningKey,
    *,
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
    label: str | None = None,
    devices: Iterable[DeviceClass] = (),
    now: datetime | None = None,
) -> dict[str, Any]:
    """Register ``subject`` with ``roles``; ``signer`` is an admin, or the subject itself.
    An agent key names the device classes it may measure on (``devices``), and only one does."""
    moment = now or utc_now()
    predicate: dict[str, Any] = {
        "action": "register",
        "keyId": subject.key_id,
        "publicKey": subject.b64,
        "roles": sorted(str(r) for r in roles),
        "validFrom": format_time(valid_from or moment),
        "issuedAt": format_time(moment),
    }
    if valid_until is not None:
        predicate["validUntil"] = format_time(valid_until)
    if label is not None:
        predicate["label"] = label
    classes = sorted(set(devices))
    if classes:
        predicate["devices"] = [c.to_json() for c in classes]
    # What admission refuses (domain.rerun_binding): never signed.
    built = build_predicate(PredicateType.KEY, predicate)
    from domain.statements import KeyPredicate  # noqa: PLC0415 - see the imports

    assert isinstance(built, KeyPredicate)
    check_agent_registration(built)
    return _signed(subject.key_id, subject.key_id, PredicateType.KEY, predicate, signer)


def key_revocation_envelope(
    subject: PublicKey,
    signer: SigningKey,
    *,
    reason: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    predicate: dict[str, Any] = {
        "action": "revoke",
        "keyId": subject.key_id,
        "publicKey": subject.b64,
        "issuedAt": format_time(now or utc_now()),
    }
    if reason is not None:
        predicate["reason"] = reason
    return _signed(subject.key_id, subject.key_id, PredicateType.KEY, predicate, signer)


class RerunRequestIssue(TypedDict, total=False):
    """How a rerun request is issued; each is fresh unless given: a random job id, a secret
    nonce, the time now."""

    job_id: str | None
    nonce: str | None
    now: datetime | None


def rerun_request_envelope(
    run_digest: str,
    run_name: str,
    key: SigningKey,
    *,
    artifact_digest: str,
    workload_digest: str,
    product: str,
    architecture: str,
    expires_at: datetime,
    **issue: Unpack[RerunRequestIssue],
) -> dict[str, Any]:
    """An admin's request for a controlled rerun; a fresh job id and secret nonce by default."""
    _refuse_unknown("rerun_request_envelope", dict(issue), RerunRequestIssue.__annotations__)
    predicate: dict[str, Any] = {
        "jobId": issue.get("job_id") or str(uuid.uuid4()),
        "nonce": issue.get("nonce") or secrets.token_hex(32),
        "runDigest": run_digest,
        "artifactDigest": artifact_digest,
        "workloadDigest": workload_digest,
        "requirements": {"product": product, "architecture": architecture},
        "expiresAt": format_time(expires_at),
        "issuedAt": format_time(issue.get("now") or utc_now()),
    }
    return _signed(run_name, run_digest, PredicateType.RERUN_REQUEST, predicate, key)


def rerun_claim_envelope(
    run_digest: str,
    run_name: str,
    key: SigningKey,
    *,
    job_id: str,
    device: dict[str, str],
    lease_seconds: int = 3600,
    now: datetime | None = None,
) -> dict[str, Any]:
    """An agent's claim on an open job; ``device`` holds product, architecture,
    gpuUuidHash and backend (the device the agent will measure on)."""
    predicate: dict[str, Any] = {
        "jobId": job_id,
        "runDigest": run_digest,
        "leaseSeconds": lease_seconds,
        "device": device,
        "issuedAt": format_time(now or utc_now()),
    }
    return _signed(run_name, run_digest, PredicateType.RERUN_CLAIM, predicate, key)


def rerun_envelope(
    run_digest: str,
    run_name: str,
    key: SigningKey,
    *,
    result: dict[str, Any],
    now: datetime | None = None,
) -> dict[str, Any]:
    """An agent's signed rerun/v1 result; ``result`` holds jobId, nonce, cases, summary,
    environment and calibration (see domain.statements.RerunPredicate)."""
    predicate = {
        "protocol": "kernelindex-rerun-v1",
        **result,
        "issuedAt": format_time(now or utc_now()),
    }
    return _signed(run_name, run_digest, PredicateType.RERUN, predicate, key)
