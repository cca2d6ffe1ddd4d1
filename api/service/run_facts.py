"""The facts of a run's record that are read from more than one place: when it was published,
admitted and observed; who it is by; what its source measured; the commands its page offers.

Each is computed here once, for the API, the pages and ``kernelindex show`` alike.
"""

from __future__ import annotations

import math
import shlex
from typing import Any

from api.service.models.runs import (
    PrimaryMeasurement,
    Provenance,
    ReportedMeasurement,
    TakePart,
)
from domain.importers.identity import identity_from_run
from domain.quantities import format_ns
from domain.sources import SOURCE_NAMES

FROM_MANIFEST = "its implementation manifest"
FROM_SOURCE_RECORD = "the run's source record"


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


SIGNED = "the signed ingestion"
SNAPSHOT = "the source's record the ingestion names by digest"


def provenance(
    predicate: dict[str, Any],
    spec: dict[str, Any],
    admitted_at: str | None,
    snapshot_published: str | None = None,
) -> Provenance:
    """The source (slug and own name), its publication time where its ingestion states one
    (else where the source's record it names does: ``snapshot_published``), the ledger's
    admission time and the run's observation time."""
    source = _text(predicate.get("source"))
    signed = _text(predicate.get("publishedAt"))
    published = signed or snapshot_published
    return Provenance(
        source=source,
        source_name=_text(predicate.get("sourceName")) or SOURCE_NAMES.get(source or ""),
        published_at=published,
        published_stated_by=None if published is None else SIGNED if signed else SNAPSHOT,
        admitted_at=admitted_at,
        observed_at=_text(spec.get("observedAt")),
    )


def identity_facts(run: dict[str, Any], implementation: Any) -> dict[str, Any]:
    """Implementation, project and revision (``Identity``'s fields): from the implementation
    manifest when the ledger holds it, else as the run's own record states them in its
    source's form (``domain.importers.identity``), marked so."""
    if isinstance(implementation, dict):
        metadata = _mapping(implementation.get("metadata"))
        spec = _mapping(implementation.get("spec"))
        revision = _mapping(spec.get("projectRevision"))
        authors = [
            a["name"]
            for a in metadata.get("authors") or []
            if isinstance(a, dict) and a.get("name")
        ]
        return {
            "implementation": _text(metadata.get("title")) or _text(metadata.get("name")),
            "project": _text(revision.get("repository")) or (", ".join(authors) or None),
            "revision": _text(revision.get("version")) or _text(revision.get("commit")),
            "stated_by": FROM_MANIFEST,
        }
    stated = identity_from_run(run)
    if stated is None:
        return {"implementation": None, "project": None, "revision": None, "stated_by": None}
    return {
        "implementation": stated.implementation,
        "project": stated.project,
        "revision": stated.revision,
        "stated_by": FROM_SOURCE_RECORD,
        "source_record_fields": dict(stated.fields),
    }


def reported_measurements(spec: dict[str, Any]) -> list[ReportedMeasurement]:
    """The measurements the source published with the run, as its manifest lists them."""
    found = []
    for m in spec.get("measurements") or []:
        if not isinstance(m, dict):
            continue
        value = m.get("value")
        count = m.get("sampleCount")
        found.append(
            ReportedMeasurement(
                metric=_text(m.get("metric")),
                statistic=_text(m.get("statistic")),
                value=value
                if isinstance(value, int | float) and not isinstance(value, bool)
                else None,
                unit=_text(m.get("unit")),
                sample_count=count
                if isinstance(count, int) and not isinstance(count, bool)
                else None,
            )
        )
    return found


def own_latency_ns(primary: PrimaryMeasurement, timing: dict[str, Any]) -> int | None:
    """The latency a reproduction of this run attests by default: its primary value when that
    is a latency in ns, else the source's latency at its primary statistic; None when the
    run states no latency."""
    value: Any = primary.latency_ns
    if value is None:
        latencies = _mapping(timing.get("latencyNs"))
        value = latencies.get(str(timing.get("primaryStatistic") or ""))
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    rounded = round(value)
    return rounded if rounded > 0 else None


def take_part(digest: str, observed_ns: int | None, server: str) -> TakePart:
    """The page's copyable signed commands, each with this run's own values: a reproduction
    attests the run's own latency (the reproducer edits it to what they saw)."""
    where = shlex.quote(server.rstrip("/")) if server else "URL"
    observed = f" --observed-ns {observed_ns}" if observed_ns is not None else ""
    return TakePart(
        observed_ns=observed_ns,
        observed=format_ns(observed_ns) if observed_ns is not None else None,
        attest=(
            f'kernelindex attest {digest} --type reproduced --body "what you ran and saw"'
            f"{observed} --key me.pem --server {where}"
        ),
        report=(
            f"kernelindex attest {digest} --type issue_report --reason incorrect_result"
            f' --body "what is wrong, and how you know" --key me.pem --server {where}'
        ),
        rerun=f"kernelindex rerun request {digest}",
    )
