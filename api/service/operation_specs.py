"""What an operation is, from the definition its source published (its ``OperationSpec``).

The importers keep each source's definition as an ``OperationSpec`` manifest artifact (the
catalog's operations, FlashInfer-Bench and SOL-ExecBench ``definition.json``, GPU MODE's
transcribed problems), named by its ``metadata.name``. A workload names its operation by the
spec's manifest digest (``operationSpecDigest``); the spec shown is the one whose digest a
workload of the operation names, so a definition of another operation that happens to share
a name is never shown.

The spec keeps the reference implementation's language only (as the catalog's specs do: its
code would change the spec's digest, and so every workload's and group's key). The code is
read from the source's definition as the importers keep it (``domain.importers.definitions``):
a definition artifact stored beside its solutions, or the definition inside a rerun workload
artifact; it is shown only from a definition that maps to the very spec shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from api.service.models.views import Argument, Axis, OperationAbout
from domain.documents import parse_json
from domain.errors import DomainError
from domain.importers.definitions import definition_spec_digests
from domain.importers.definitions import reference_code as definition_reference
from domain.importers.records import (
    DEFINITION_MEDIA_TYPE,
    DEFINITION_SUFFIX,
    MANIFEST_MEDIA_TYPE,
    WORKLOAD_MEDIA_TYPE,
    WORKLOAD_SUFFIX,
    Artifact,
)
from domain.manifests.canonical_form import manifest_digest
from ledger.store.read_door import Rows
from projections import view_reads

if TYPE_CHECKING:
    from ledger.store.event_store import StoreSession

# Specs found, by digest: a stored artifact never changes, so a spec once found stays right.
# (Artifact names are not indexed: finding one scans them, ~50 ms on the whole catalog.)
_FOUND: dict[str, OperationAbout] = {}
MAX_CACHED = 4096
# Reference code found (or not) by (database, operation, spec digest), with the number of
# artifacts the ledger held then: another artifact stored looks again.
_REFERENCES: dict[tuple[str, str, str], tuple[int, tuple[str, str] | None]] = {}
# Definitions tried for a spec's reference code (each is mapped to check it): the importers
# keep one per definition and a few rerun workloads of it, all of the one definition.
MAX_REFERENCE_TRIES = 8


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def candidate_names(benchmark: str) -> list[str]:
    """The names an importer gives the spec of ``benchmark``: its slug (SOL-ExecBench,
    FlashInfer-Bench, the catalog), ``gpumode-`` and the leaderboard's slug (GPU MODE, whose
    operations are named ``leaderboard/N`` per problem size)."""
    base = benchmark.split("/", 1)[0]
    names = [_slug(benchmark), _slug(base)]
    names += [f"gpumode-{n}" for n in names]
    return list(dict.fromkeys(n for n in names if n))


def _arguments(items: Iterable[Any]) -> list[Argument]:
    found = []
    for item in items:
        if not isinstance(item, dict):
            continue
        tensor = item.get("tensor")
        scalar = item.get("scalar")
        body = tensor if isinstance(tensor, dict) else scalar if isinstance(scalar, dict) else {}
        shape = body.get("shape") if isinstance(tensor, dict) else None
        found.append(
            Argument(
                name=str(item.get("name")),
                dtype=str(body["dtype"]) if body.get("dtype") is not None else None,
                shape=[d if isinstance(d, int) else str(d) for d in shape]
                if isinstance(shape, list)
                else None,
            )
        )
    return found


def about(digest: str, document: dict[str, Any]) -> OperationAbout:
    """An OperationSpec manifest as the operation page explains it."""
    metadata = document.get("metadata") or {}
    spec = document.get("spec") or {}
    axes = spec.get("axes") or {}
    reference = spec.get("reference")
    refs = metadata.get("sourceRefs") or []
    return OperationAbout(
        spec_digest=digest,
        title=metadata.get("title"),
        family=spec.get("family"),
        description=metadata.get("description"),
        axes=[
            Axis(
                name=str(name),
                role=str(axis.get("role", "")),
                value=axis.get("value", axis.get("expression")),
            )
            for name, axis in axes.items()
            if isinstance(axis, dict)
        ],
        inputs=_arguments(spec.get("inputs") or []),
        outputs=_arguments(spec.get("outputs") or []),
        reference=str(reference.get("language") or "given")
        if isinstance(reference, dict)
        else None,
        source_url=next(
            (str(r["url"]) for r in refs if isinstance(r, dict) and r.get("url")), None
        ),
    )


def operation_about(session: StoreSession, benchmark: str) -> OperationAbout | None:
    """The definition of ``benchmark`` that its workloads name, with its reference code, or
    None when the ledger holds none of them."""
    # The session's door is SQLAlchemy's: imported here, so a leaderboard read through the
    # driver (``operation_spec``) loads none of it.
    from ledger.store.event_store import connection_of  # noqa: PLC0415
    from projections.queries import rows_of  # noqa: PLC0415

    rows = rows_of(session)
    found = operation_spec(rows, benchmark)
    if found is None or found.reference is None:
        return found
    database = str(connection_of(session).engine.url)
    kept = _kept_reference(rows, database, benchmark, found.spec_digest)
    if kept is None:
        return found
    return msgspec.structs.replace(found, reference_artifact=kept[0], reference_code=kept[1])


def operation_spec(rows: Rows, benchmark: str) -> OperationAbout | None:
    """The definition of ``benchmark`` that its workloads name, without its reference code
    (what a leaderboard says of its operation), or None when the ledger holds none."""
    wanted = view_reads.operation_spec_digests(rows, benchmark)
    names = candidate_names(benchmark)
    if not wanted or not names:
        return None
    for digest in sorted(wanted):
        if digest in _FOUND:
            return _FOUND[digest]
    for (content,) in rows.rows("named_artifacts", media_type=MANIFEST_MEDIA_TYPE, names=names):
        try:
            document = json.loads(bytes(content))
            digest = manifest_digest(document)
        except (ValueError, DomainError):
            continue  # not a manifest we can read: it explains nothing
        if document.get("kind") == "OperationSpec" and digest in wanted:
            found = about(digest, document)
            if len(_FOUND) < MAX_CACHED:
                _FOUND[digest] = found
            return found
    return None


def _kept_reference(
    rows: Rows, database: str, benchmark: str, spec_digest: str
) -> tuple[str, str] | None:
    """:func:`reference_code`, looked up again only when the ledger's artifacts changed: the
    code is read from what this ledger holds (a definition imported later gives it), not from
    the spec a digest fixes. Finding it scans the artifacts' names (~20 ms of CPU on the real
    ledger); counting them, ~0.2 ms. Kept per ``database`` (its URL), for a process may serve
    several."""
    count = int(rows.rows("artifact_count")[0][0])
    key = (database, benchmark, spec_digest)
    cached = _REFERENCES.get(key)
    if cached is not None and cached[0] == count:
        return cached[1]
    found = reference_code(rows, benchmark, spec_digest)
    if len(_REFERENCES) >= MAX_CACHED:
        _REFERENCES.clear()
    _REFERENCES[key] = (count, found)
    return found


def reference_code(rows: Rows, benchmark: str, spec_digest: str) -> tuple[str, str] | None:
    """``(artifact digest, code)``: the reference implementation of a definition the ledger
    keeps that maps to the spec ``spec_digest`` (None: it keeps none)."""
    names = [
        name + suffix
        for name in candidate_names(benchmark)
        for suffix in (DEFINITION_SUFFIX, WORKLOAD_SUFFIX)
    ]
    if not names:
        return None
    found = rows.rows(
        "reference_artifacts",
        media_types=[DEFINITION_MEDIA_TYPE, WORKLOAD_MEDIA_TYPE],
        names=names,
        limit=MAX_REFERENCE_TRIES,
    )
    for digest, media_type, content in found:
        kept = bytes(content)
        if Artifact(kept, media_type).digest != digest:
            continue  # damaged: not the bytes stored under that digest
        try:
            document = parse_json(kept)
        except DomainError:
            continue
        if media_type == WORKLOAD_MEDIA_TYPE and isinstance(document, dict):
            document = document.get("definition")
        if not isinstance(document, dict):
            continue
        code = definition_reference(document)
        if code is not None and spec_digest in definition_spec_digests(document):
            return str(digest), code
    return None
