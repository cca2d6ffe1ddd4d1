"""A run together with the manifests it references, checked as one unit.

The run names its protocol, environment, implementation and workload by digest. Every
manifest supplied alongside must be of the right kind and must digest to exactly the
reference the run makes. Implementation and workload may be absent (a leaderboard import
often has only their digests); protocol and environment must be present. A new run's claim
must read as one value (``check_claim``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from domain.comparison import primary_measurement
from domain.errors import DigestMismatchError, DomainError, ManifestError
from domain.manifests.canonical_form import admitted_manifest_digest, manifest_digest

# role in the set → (kind, field of the run spec that references it)
_MEMBERS: dict[str, tuple[str, str]] = {
    "protocol": ("BenchmarkProtocol", "protocolDigest"),
    "environment": ("ExecutionEnvironment", "environmentDigest"),
    "implementation": ("ImplementationRevision", "implementationDigest"),
    "workload": ("WorkloadCase", "workloadDigest"),
}
REQUIRED_MEMBERS = ("run", "protocol", "environment")
ALL_MEMBERS = ("run", *_MEMBERS)


class CheckedManifestSet(msgspec.Struct, frozen=True):
    """A run's manifests (validated, as supplied) and their digests, keyed by role."""

    documents: Mapping[str, Mapping[str, Any]]
    digests: dict[str, str]

    @property
    def run(self) -> Mapping[str, Any]:
        return self.documents["run"]

    @property
    def run_digest(self) -> str:
        return self.digests["run"]

    @property
    def run_name(self) -> str:
        return str(self.run["metadata"]["name"])


def check_manifest_set(
    manifests: Mapping[str, Any], *, admitted: bool = False, json_read: bool = False
) -> CheckedManifestSet:
    """Validate and digest every manifest, then check the run's references against them.

    ``admitted``: the set is read from one of this ledger's own stored events, so each
    digest is recomputed without the schema gate (``admitted_manifest_digest`` says why
    that is sound, and who keeps the gate). ``json_read``: the documents are what the
    strict JSON reader read from a signed statement's text (``validate_manifest``)."""
    unknown = set(manifests) - set(ALL_MEMBERS)
    if unknown:
        raise ManifestError(f"manifest set has unknown members: {', '.join(sorted(unknown))}")
    missing = [m for m in REQUIRED_MEMBERS if manifests.get(m) is None]
    if missing:
        raise ManifestError(f"manifest set is missing: {', '.join(missing)}")
    documents: dict[str, Mapping[str, Any]] = {}
    digests: dict[str, str] = {}
    for role in ALL_MEMBERS:
        document = manifests.get(role)
        if document is None:
            continue
        expected_kind = "BenchmarkRun" if role == "run" else _MEMBERS[role][0]
        kind = document.get("kind") if isinstance(document, Mapping) else None
        if kind != expected_kind and not (role == "workload" and kind == "WorkloadSuite"):
            raise ManifestError(f"{role} manifest must be a {expected_kind}, got {kind!r}")
        try:
            digests[role] = (
                admitted_manifest_digest(document, json_read=json_read)
                if admitted
                else manifest_digest(document, json_read=json_read)
            )
        except ManifestError as exc:
            raise ManifestError(f"{role} manifest: {exc.message}") from None
        documents[role] = document
    spec = documents["run"]["spec"]
    for role, (kind, field) in _MEMBERS.items():
        if role not in digests:
            continue
        # The schema requires all four references; a stored document read without it may
        # lack one, which then references nothing (a failed check, not a KeyError).
        referenced = spec.get(field)
        if referenced != digests[role]:
            raise DigestMismatchError(
                f"run spec.{field} is {referenced} but the supplied {kind} "
                f"'{documents[role]['metadata']['name']}' digests to {digests[role]}"
            )
    return CheckedManifestSet(documents=documents, digests=digests)


def check_claim(run: Mapping[str, Any]) -> None:
    """A new run's claim must read as one value, or none: every view, rank and comparison of
    the run reads it, and the schema lets ``primaryStatistic`` name a pair. Checked where a
    run comes in (authoring, admission, and re-verification, which judges as admission
    does); folds, pages and attachments read stored runs with
    ``domain.comparison.readable_primary``, so a run admitted before this rule still shows."""
    try:
        primary_measurement(run)
    except DomainError as exc:
        raise ManifestError(f"run manifest's primary measurement: {exc.message}") from None


# What can arrive after the run: protocol and environment come with every ingestion.
ATTACHABLE_MEMBERS = ("implementation", "workload")


def lacking_references(run: Mapping[str, Any], have: Iterable[str]) -> dict[str, str]:
    """Role → digest of each attachable manifest ``run`` names by digest that is not among
    the roles ``have``: what an ingestion may take from the ledger, or an attachment add."""
    spec = run.get("spec") or {}
    held = set(have)
    return {
        role: str(spec[f"{role}Digest"])
        for role in ATTACHABLE_MEMBERS
        if role not in held and spec.get(f"{role}Digest")
    }


def with_attached(current: Mapping[str, Any], attached: Mapping[str, Any]) -> dict[str, Any]:
    """A run's manifests with later ones laid over them (absent members, ``None``, dropped),
    unchecked: for sets already admitted. ``attach_manifests`` is the checked form."""
    return {r: d for r, d in current.items() if d is not None} | {
        r: d for r, d in attached.items() if d is not None
    }


def attach_manifests(current: Mapping[str, Any], attached: Mapping[str, Any]) -> CheckedManifestSet:
    """A run's manifests with later-arriving ones added: each must be one the run lacks and
    references, of the right kind, digesting to exactly that reference. Admission and every
    fold of a run's events (projections, the offline verifier) call this one rule."""
    members = with_attached({}, attached)
    if not members:
        raise ManifestError("an attachment carries an implementation or a workload manifest")
    unknown = sorted(set(members) - set(ATTACHABLE_MEMBERS))
    if unknown:
        raise ManifestError(f"only {' and '.join(ATTACHABLE_MEMBERS)} can be attached: {unknown}")
    present = sorted(role for role in members if current.get(role) is not None)
    if present:
        raise ManifestError(f"the run already has its {' and '.join(present)} manifest")
    return check_manifest_set({**current, **members})
