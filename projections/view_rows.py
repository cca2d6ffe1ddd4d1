"""What a fold writes: one batch's pending view changes, and the rows of the views built from
a run's facts (``domain.run_facts``) and evidence (``domain.evidence``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from domain.evidence import EvidenceLevel, EvidenceResult
from domain.manifests.canonical_form import manifest_digest
from domain.ranking import RankEntry
from domain.run_facts import RunFold, RunProfile, ingestion_fold

_RUN_ROWS = msgspec.msgpack.Decoder(list[tuple[Any, ...]])


@dataclass
class Pending:
    """View changes of one batch, written together at its end."""

    new_rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    regroup: set[str] = field(default_factory=set)
    touched_groups: set[str] = field(default_factory=set)
    dirty_evidence: set[str] = field(default_factory=set)
    # Digest → (role, document, position of the first event of the batch that carried it).
    # Rows are made (``manifest_row``) only for those the views do not hold yet.
    manifests: dict[str, tuple[str, dict[str, Any], int]] = field(default_factory=dict)
    # A batch a worker process folded (``prepare``): its manifests' rows, made already, and
    # its new runs' rows as the writer inserts them, in MessagePack (then ``new_rows`` is
    # empty): a fifth of pickle's time to write, and every value comes back as it was.
    manifest_rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    packed_run_rows: bytes | None = None

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
                self.manifests[str(digest)] = (role, document, position)

    def manifest_digests(self) -> list[str]:
        """The digests of the batch's manifests, in order."""
        return sorted(self.manifests.keys() | self.manifest_rows.keys())

    def manifest_row(self, digest: str) -> dict[str, Any]:
        """The manifests view's row of a remembered manifest."""
        ready = self.manifest_rows.get(digest)
        if ready is not None:
            return ready
        role, document, position = self.manifests[digest]
        return {
            "digest": digest,
            "role": role,
            "kind": str(document.get("kind")),
            "name": str((document.get("metadata") or {}).get("name")),
            "document": json.dumps(document, sort_keys=True, separators=(",", ":")),
            "position": position,
        }

    def touch_regrouped(self) -> None:
        """The groups of runs ingested in this batch and retracted or superseded in it too."""
        for digest in self.regroup:
            row = self.new_rows.get(digest)
            if row is not None and row["comparison_key"] is not None:
                self.touched_groups.add(row["comparison_key"])

    def prepare(
        self,
        run_row: Callable[[dict[str, Any]], tuple[Any, ...]] | None,
        sent: set[str] | None = None,
    ) -> None:
        """Make what the writer needs of this batch without the decoded documents, for a
        worker to send it: the manifests' rows, the groups of regrouped new runs and, with
        ``run_row``, the new runs' rows as the writer inserts them. ``sent``: the manifests
        whose rows an earlier batch of this worker carried (the writer writes batches in log
        order, so it holds them by this one's turn and would skip them): none made again,
        and this batch's added (most batches carry every group's workload again)."""
        self.touch_regrouped()
        self.manifest_rows = {
            digest: self.manifest_row(digest)
            for digest in self.manifests
            if sent is None or digest not in sent
        }
        if sent is not None:
            sent.update(self.manifest_rows)
        self.manifests = {}
        if run_row is not None:
            self.packed_run_rows = msgspec.msgpack.encode(
                [run_row(r) for r in self.new_rows.values()]
            )
            self.new_rows = {}

    def run_rows(self) -> list[tuple[Any, ...]]:
        """The new runs' rows ``prepare`` made (none if it made none)."""
        if self.packed_run_rows is None:
            return []
        return _RUN_ROWS.decode(self.packed_run_rows)


def chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def profile_columns(fold: RunFold) -> dict[str, Any]:
    """The runs view's columns a run's profile fills (every field but ``run_digest``)."""
    columns = profile_row(fold.profile)
    del columns["run_digest"]
    return columns


def profile_row(profile: RunProfile) -> dict[str, Any]:
    """The profile's fields by name, in its order: ``run_digest`` then the runs view's
    profile columns (each column is named as the field it holds)."""
    return msgspec.structs.asdict(profile)


def new_run_row(position: int, digest: str, received_at: str, predicate: Any) -> dict[str, Any]:
    # The ingestion's profile and evidence alone: a new run's row needs no other part of a
    # ``RunFold`` (its later events in the batch change the row, not a fold).
    profile, state = ingestion_fold(position, digest, predicate)
    row = profile_row(profile)  # its run_digest is ``digest``
    row["ingested_position"] = position
    row["ingested_at"] = received_at
    row["retracted"] = False
    row["superseded_by"] = None
    row["attestations"] = 0
    row["reruns"] = 0
    row["last_position"] = position
    row.update(evidence_columns(state.result))
    row["rerun_median_ns"] = None
    row["rerun_ci95_low"] = None
    row["rerun_ci95_high"] = None
    return row


def jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (bool(v) if isinstance(v, bool) else v) for k, v in row.items()}


def evidence_columns(result: EvidenceResult) -> dict[str, Any]:
    label, order, reasons = _evidence_parts(result.level, result.reasons)
    return {
        "evidence_level": label,
        "evidence_order": order,
        "evidence_reasons": reasons,
        "evidence_caused_by": result.caused_by,
        "policy_version": result.policy_version,
    }


@functools.lru_cache(maxsize=4096)
def _evidence_parts(level: EvidenceLevel, reasons: tuple[str, ...]) -> tuple[str, int, str]:
    # (label, order, reasons as JSON), memoised on the level and reasons themselves: most
    # runs share their ingestion's few (the label is an enum name read through a property).
    return level.label, int(level), json.dumps(list(reasons))


_NONE_TIED = json.dumps([])


def tied_json(tied_with: tuple[str, ...]) -> str:
    """The ranks view's ``tied_with`` column: the runs sharing the rank, as a JSON list."""
    return json.dumps(list(tied_with)) if tied_with else _NONE_TIED


# EvidenceLevel(order) for the orders the views store, without the enum's call.
_LEVELS: dict[Any, EvidenceLevel] = {int(level): level for level in EvidenceLevel}

# The columns of the runs view a rank entry is read from, in ``ranked_entry``'s order.
RANKED_BY = (
    "run_digest",
    "comparison_key",
    "status",
    "claimed",
    "evidence_order",
    "retracted",
    "superseded_by",
    "rerun_median_ns",
    "rerun_ci95_low",
    "rerun_ci95_high",
)


def rank_entry(row: Any) -> RankEntry:
    """What ranking knows of a run, from its row of the runs view."""
    return ranked_entry([row[name] for name in RANKED_BY])


def ranked_entry(values: Sequence[Any]) -> RankEntry:
    """:func:`rank_entry` from the values of the ``RANKED_BY`` columns, in that order."""
    run, comparison_key, status, claimed, order, retracted, superseded_by, median, low, high = (
        values
    )
    level = _LEVELS.get(order) if type(order) is int else None
    return RankEntry(
        run=run,
        comparison_key=comparison_key,
        status=status,
        claimed=claimed,
        level=level if level is not None else EvidenceLevel(order),
        retracted=bool(retracted),
        superseded=superseded_by is not None,
        rerun_median_ns=median,
        rerun_ci95_ns=(low, high) if low is not None and high is not None else None,
    )
