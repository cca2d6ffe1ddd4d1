"""What a fold writes: one batch's pending view changes, and the rows of the views built from
a run's facts (``domain.run_facts``) and evidence (``domain.evidence``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from domain.evidence import EvidenceLevel, EvidenceResult
from domain.manifests.canonical_form import manifest_digest
from domain.ranking import RankEntry
from domain.run_facts import RunFold


@dataclass
class Pending:
    """View changes of one batch, written together at its end."""

    new_rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    regroup: set[str] = field(default_factory=set)
    touched_groups: set[str] = field(default_factory=set)
    dirty_evidence: set[str] = field(default_factory=set)
    manifests: dict[str, dict[str, Any]] = field(default_factory=dict)

    def remember_manifests(self, position: int, carried: dict[str, Any]) -> None:
        """Index the referenced manifests an admitted event carries, by the digest the run
        names them with (admission checked that each digests to exactly that)."""
        spec = (carried.get("run") or {}).get("spec") or {}
        for role, document in sorted(carried.items()):
            if role == "run" or not isinstance(document, dict):
                continue
            # An attachment carries no run: its (rare) documents are digested here.
            digest = spec.get(f"{role}Digest") if spec else manifest_digest(document)
            if digest not in self.manifests:
                self.manifests[str(digest)] = {
                    "digest": str(digest),
                    "role": role,
                    "kind": str(document.get("kind")),
                    "name": str((document.get("metadata") or {}).get("name")),
                    "document": json.dumps(document, sort_keys=True, separators=(",", ":")),
                    "position": position,
                }


def chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def profile_columns(fold: RunFold) -> dict[str, Any]:
    profile = fold.profile
    return {
        "name": profile.name,
        "title": profile.title,
        "source": profile.source,
        "external_id": profile.external_id,
        "benchmark": profile.benchmark,
        "status": profile.status,
        "comparison_key": profile.comparison_key,
        "metric": profile.metric,
        "statistic": profile.statistic,
        "unit": profile.unit,
        "claimed": profile.claimed,
        "product": profile.product,
        "architecture": profile.architecture,
        "observed_at": profile.observed_at,
        "protocol_digest": profile.protocol_digest,
        "environment_digest": profile.environment_digest,
        "workload_digest": profile.workload_digest,
        "author": profile.author,
    }


def new_run_row(position: int, digest: str, received_at: str, predicate: Any) -> dict[str, Any]:
    fold = RunFold.ingested(position, digest, predicate)
    return {
        "run_digest": digest,
        **profile_columns(fold),
        "ingested_position": position,
        "ingested_at": received_at,
        "retracted": False,
        "superseded_by": None,
        "attestations": 0,
        "reruns": 0,
        "last_position": position,
        **evidence_columns(fold.evidence),
        "rerun_median_ns": None,
        "rerun_ci95_low": None,
        "rerun_ci95_high": None,
    }


def jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (bool(v) if isinstance(v, bool) else v) for k, v in row.items()}


def evidence_columns(result: EvidenceResult) -> dict[str, Any]:
    return {
        "evidence_level": result.level.label,
        "evidence_order": int(result.level),
        "evidence_reasons": json.dumps(list(result.reasons)),
        "evidence_caused_by": result.caused_by,
        "policy_version": result.policy_version,
    }


def rank_entry(row: Any) -> RankEntry:
    low, high = row["rerun_ci95_low"], row["rerun_ci95_high"]
    return RankEntry(
        run=row["run_digest"],
        comparison_key=row["comparison_key"],
        status=row["status"],
        claimed=row["claimed"],
        level=EvidenceLevel(row["evidence_order"]),
        retracted=bool(row["retracted"]),
        superseded=row["superseded_by"] is not None,
        rerun_median_ns=row["rerun_median_ns"],
        rerun_ci95_ns=(low, high) if low is not None and high is not None else None,
    )
