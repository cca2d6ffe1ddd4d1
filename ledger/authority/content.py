"""What a signed statement must say about its subject, checked the same at admission and on
every re-verification (the stateless part; what depends on a run's earlier events is the
aggregates' and the run rules')."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from domain.errors import ManifestError
from domain.manifests.manifest_set import CheckedManifestSet, check_claim, check_manifest_set
from domain.statements import PredicateType
from domain.timestamps import format_time, parse_time
from ledger.authority.signers import MAX_CLOCK_SKEW
from ledger.errors import ClockSkewError, SubjectMismatchError

if TYPE_CHECKING:
    # The statement models are made on first use (domain.statements): a process that
    # reads without checking a statement (a read command) never makes them.
    # Where a model is needed as a value, the function that needs it imports it.
    from domain.statements import IngestionPredicate, SignedPredicate, Statement

# Statements that act at the moment they are received (a claim starts a lease): one issued
# longer ago than the clock skew allows is stale, e.g. an old claim re-posted by someone.
TIMELY = frozenset({PredicateType.RERUN_CLAIM})


def check_timely(statement: Statement, predicate: SignedPredicate, received_at: datetime) -> None:
    """A statement that acts now was issued now: within the clock skew of its receipt."""
    if statement.predicateType not in TIMELY:
        return
    issued = parse_time(predicate.issuedAt, "predicate.issuedAt")
    if issued < received_at - MAX_CLOCK_SKEW:
        raise ClockSkewError(
            f"the {statement.predicateType.rsplit('/', 2)[-2]} was issued at "
            f"{predicate.issuedAt}, {format_time(received_at)} is too late to act on it: "
            "sign a fresh one"
        )


def check_ingestion(
    statement: Statement,
    predicate: IngestionPredicate,
    *,
    admitted: bool = False,
    json_read: bool = False,
) -> CheckedManifestSet:
    """The manifests are valid and digest to the statement's subject, the subject is named as
    the run is, and the predicate's source is the run's own ``sourceNative.source``.

    ``admitted``: the statement is this ledger's own stored event, re-checked on a read;
    its manifests are not schema-checked again (``check_manifest_set``). ``json_read``: the
    statement is an envelope's, read from its payload by the strict JSON reader
    (``Envelope.statement``), so its manifests are JSON values (``validate_manifest``)."""
    checked = check_manifest_set(
        statement.predicate["manifests"], admitted=admitted, json_read=json_read
    )
    check_claim(checked.run)
    if statement.subject_digest != checked.run_digest:
        raise SubjectMismatchError(
            f"statement subject is {statement.subject_digest} but the run manifest digests "
            f"to {checked.run_digest}"
        )
    if statement.subject_name != checked.run_name:
        raise SubjectMismatchError(
            f"statement subject name {statement.subject_name!r} is not the run's "
            f"metadata.name {checked.run_name!r}"
        )
    native = checked.run["spec"].get("sourceNative")
    # Not a mapping only in a stored document read without the schema: it names no source.
    source = native.get("source") if isinstance(native, Mapping) else None
    if native is not None and source != predicate.source:
        raise ManifestError(
            f"predicate source {predicate.source!r} differs from the run's "
            f"sourceNative.source {source!r}"
        )
    return checked
