"""What a signed statement must say about its subject, checked the same at admission and on
every re-verification (the stateless part; what depends on a run's earlier events is the
aggregates' and the run rules')."""

from __future__ import annotations

from domain.errors import ManifestError
from domain.manifests.manifest_set import CheckedManifestSet, check_manifest_set
from domain.statements import IngestionPredicate, Statement
from ledger.errors import SubjectMismatchError


def check_ingestion(statement: Statement, predicate: IngestionPredicate) -> CheckedManifestSet:
    """The manifests are valid and digest to the statement's subject, the subject is named as
    the run is, and the predicate's source is the run's own ``sourceNative.source``."""
    checked = check_manifest_set(statement.predicate["manifests"])
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
    if native is not None and native.get("source") != predicate.source:
        raise ManifestError(
            f"predicate source {predicate.source!r} differs from the run's "
            f"sourceNative.source {native.get('source')!r}"
        )
    return checked
