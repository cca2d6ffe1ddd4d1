"""Evidence levels: a pure function of a run's events (docs/design.md §7).

Order: ``refuted < reported < reproducible < verified < replicated``.

The projection turns each stored event of a run into one of the small frozen *facts* below
and calls :func:`evaluate_evidence` (or folds them one at a time with :class:`EvidenceState`,
which gives the same answer). Nothing here reads a database, a clock or a signature: what
the ledger admitted is stated by the facts (``RerunFacts.accepted``).

The rules, exactly
------------------

**At ingestion** (the one :class:`IngestionFacts`; the initial level never changes later):

* status ``passed`` with a pinned source (an implementation artifact digest) *and* raw
  evidence (trace, logs or samples) → ``reproducible``;
* status ``passed`` otherwise → ``reported``;
* any other status (``runtime_error``, ``incorrect_numerical``…) → ``reported``, and the run is
  **frozen**: it makes no performance claim, so no rerun can verify or refute it, and
  nothing after ingestion moves its level. (It is never ranked either: ranking needs
  ``passed``.)

**Afterwards only reruns count**, and only those that are

* ``accepted`` — admitted by the ledger as an agent-signed rerun for an open job of this run;
  a rerun statement that was not (wrong signer role, expired job, …) changes nothing. It
  must also be a completed measurement on a measuring backend (``cuda``), for a job *bound
  to the run's code* (its solution and workload are the artifacts the run's manifests name),
  by a key whose registration names that GPU as one of its device classes
  (:mod:`domain.rerun_binding`, read by ``domain.run_facts.rerun_facts``): a key bound to a
  test backend (``cpu-test``) never raises a level, nor does a job that measures other code;
  and
* on the run's hardware — rerun ``product`` and ``architecture`` both equal to the ingested
  environment's (exact string equality). A run whose product or architecture is unknown
  (``None``) can therefore never be verified or refuted. Reruns on other hardware change
  nothing at all, not even the reasons.

Call these the *matching* reruns, ordered by ledger position. Then:

* **refuted** — the latest matching rerun did not have all cases correct.
* Otherwise consider the *qualifying* matching reruns: all cases correct and the measured
  statistic within tolerance of the claim, ``measured ≤ tolerance × claimed`` (default
  tolerance 1.10, compared exactly, so the boundary itself passes). The measured statistic is
  the rerun's value of the claim's primary statistic when it reports it (``median``, or
  ``mean`` when ``mean_ns`` is given) and its median otherwise. Only qualifying reruns *after
  the latest correctness failure* count: a refutation must be earned back with fresh reruns.

  * **replicated** — two qualifying reruns whose agent keys differ *and* whose hashed GPU
    UUIDs differ (one agent on two GPUs, or two agents on one GPU, is not a replication);
  * **verified** — at least one qualifying rerun;
  * else the **initial level**. In particular a rerun that is correct but too slow neither
    verifies nor refutes; when it is the latest rerun after a failure, the level returns
    from ``refuted`` to the initial level.

* A claim with no latency to compare against (``claimed_ns`` is ``None`` — e.g. a GPU MODE
  ``score`` in seconds) can be refuted but never verified: its correct reruns qualify for
  nothing.

Attestations, reports, rerun requests and lifecycle events (retract, supersede) never change
the result — neither level, reasons nor cause. Retraction removes a run from ranking
(:mod:`domain.ranking`) but leaves its level visible.

``caused_by`` is the position of the event at which the level last took its current value
(the ingestion, when no rerun ever changed it). ``reasons`` describe the current level only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from enum import IntEnum
from fractions import Fraction
from typing import Any

import msgspec
from msgspec.structs import replace

from domain.comparison import MAPPINGS, PrimaryMeasurement, readable_primary
from domain.errors import DomainError

# v2 (issue 32): a rerun counts only for a job bound to its run's code, from a key bound to
# its device (domain.rerun_binding); v1 counted any admitted agent result.
POLICY_VERSION = "evidence-v2"
DEFAULT_TOLERANCE = 1.10
PASSED = "passed"


class EvidencePolicyError(DomainError):
    """The events of a run do not form a history the policy can evaluate."""

    code = "invalid-evidence-history"


class EvidenceLevel(IntEnum):
    """Ordered: ``refuted < reported < reproducible < verified < replicated``."""

    REFUTED = 0
    REPORTED = 1
    REPRODUCIBLE = 2
    VERIFIED = 3
    REPLICATED = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    def __str__(self) -> str:
        return self.label

    @classmethod
    def parse(cls, label: str) -> EvidenceLevel:
        try:
            return cls[label.upper()]
        except KeyError:
            names = ", ".join(level.label for level in cls)
            raise EvidencePolicyError(f"unknown evidence level {label!r}; one of {names}") from None


# --- the facts ------------------------------------------------------------------------------------


def _finite_positive(value: float | None, what: str) -> None:
    if value is not None and (isinstance(value, bool) or not math.isfinite(value) or value <= 0):
        raise EvidencePolicyError(f"{what} must be a finite positive number, got {value!r}")


class IngestionFacts(msgspec.Struct, frozen=True):
    """What the ingestion event fixes about a run.

    ``has_pinned_source``: the implementation is pinned by an artifact digest. ``has_raw_evidence``:
    a trace, logs or raw samples are attached. ``product``/``architecture``: the ingested
    environment's hardware (``None`` when unknown). ``claimed_ns``: the claimed primary latency
    in ns (``None`` when the claim is not a latency, or there is none); ``primary_statistic``
    names it (``mean``, ``median``…).
    """

    position: int
    status: str
    has_pinned_source: bool
    has_raw_evidence: bool
    product: str | None
    architecture: str | None
    primary_statistic: str | None
    claimed_ns: float | None
    tolerance: float = DEFAULT_TOLERANCE

    def __post_init__(self) -> None:
        _finite_positive(self.claimed_ns, "claimed_ns")
        _finite_positive(self.tolerance, "tolerance")


class RerunFacts(msgspec.Struct, frozen=True):
    """One rerun recorded for the run (a ``rerun/v1`` statement the ledger stored).

    ``accepted``: admitted as an agent-signed rerun of an open job for this run. ``median_ns``
    and ``ci95_ns`` summarise the measured latency (``None`` when the rerun measured nothing,
    e.g. because a case failed); ``mean_ns`` optionally as well.
    """

    position: int
    agent_key_id: str
    gpu_uuid_hash: str
    product: str
    architecture: str
    all_cases_correct: bool
    median_ns: float | None
    ci95_ns: tuple[float, float] | None
    accepted: bool
    mean_ns: float | None = None

    def __post_init__(self) -> None:
        _finite_positive(self.median_ns, "median_ns")
        _finite_positive(self.mean_ns, "mean_ns")
        if self.ci95_ns is not None:
            low, high = self.ci95_ns
            if not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= high):
                raise EvidencePolicyError(f"ci95_ns must be 0 ≤ low ≤ high, got {self.ci95_ns}")

    def measured_for(self, statistic: str | None) -> tuple[str, float | None]:
        """(statistic used, value) to compare with a claim of ``statistic``."""
        if statistic == "mean" and self.mean_ns is not None:
            return "mean", self.mean_ns
        return "median", self.median_ns


class AttestationFacts(msgspec.Struct, frozen=True):
    """A community attestation (reproduced, could_not_reproduce, note…): never moves the level."""

    position: int
    attestation_type: str
    observed_ns: float | None = None


class ReportFacts(msgspec.Struct, frozen=True):
    """A report about the run (abuse, wrong data…): never moves the level."""

    position: int
    reason: str


class RerunRequestFacts(msgspec.Struct, frozen=True):
    """An admin's rerun job request: the *request* never moves the level, only its result."""

    position: int
    job_id: str
    product: str
    architecture: str


class LifecycleFacts(msgspec.Struct, frozen=True):
    """Retract or supersede: removes the run from ranking, never changes its level."""

    position: int
    action: str  # "retract" | "supersede"
    reason: str = ""


RunEvent = (
    IngestionFacts
    | RerunFacts
    | AttestationFacts
    | ReportFacts
    | RerunRequestFacts
    | LifecycleFacts
)


class EvidenceResult(msgspec.Struct, frozen=True):
    level: EvidenceLevel
    reasons: tuple[str, ...]
    caused_by: int
    policy_version: str = POLICY_VERSION

    def as_json(self) -> dict[str, Any]:
        return {
            "level": self.level.label,
            "reasons": list(self.reasons),
            "causedBy": self.caused_by,
            "policyVersion": self.policy_version,
        }


# --- the fold -------------------------------------------------------------------------------------


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) and not value.is_integer() else f"{value:.0f}"


def _exact(value: float) -> Fraction:
    # Decimal reading of the number as written (1.1 is 11/10, not its binary neighbour).
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def initial_result(ingestion: IngestionFacts) -> EvidenceResult:
    """The level fixed at ingestion, with its reasons."""
    if ingestion.status != PASSED:
        return EvidenceResult(
            EvidenceLevel.REPORTED,
            (
                f"source status {ingestion.status!r}, not 'passed': the run makes no performance"
                " claim; reruns neither verify nor refute it",
            ),
            ingestion.position,
        )
    pinned = (
        "pinned source: implementation artifact digest present"
        if ingestion.has_pinned_source
        else "no pinned source (no implementation artifact digest)"
    )
    raw = (
        "raw evidence attached (trace, logs or samples)"
        if ingestion.has_raw_evidence
        else "no raw evidence (trace, logs or samples)"
    )
    level = (
        EvidenceLevel.REPRODUCIBLE
        if ingestion.has_pinned_source and ingestion.has_raw_evidence
        else EvidenceLevel.REPORTED
    )
    return EvidenceResult(
        level=level,
        reasons=("source marked the run passed", pinned, raw),
        caused_by=ingestion.position,
        policy_version=POLICY_VERSION,
    )


class _Qualifying(msgspec.Struct, frozen=True):
    position: int
    agent_key_id: str
    gpu_uuid_hash: str


def _replicating_pair(reruns: tuple[_Qualifying, ...]) -> tuple[_Qualifying, _Qualifying] | None:
    """The earliest-completed pair with distinct agent keys and distinct GPUs, if any."""
    for j, later in enumerate(reruns):
        for earlier in reruns[:j]:
            if (
                earlier.agent_key_id != later.agent_key_id
                and earlier.gpu_uuid_hash != later.gpu_uuid_hash
            ):
                return earlier, later
    return None


class EvidenceState(msgspec.Struct, frozen=True):
    """Incremental form of the policy: ``state = EvidenceState.start(ingestion)``, then
    ``state = state.apply(event)`` for each later event in ledger order; ``state.result``.

    Equal to :func:`evaluate_evidence` over the same events.
    """

    ingestion: IngestionFacts
    initial: EvidenceResult
    result: EvidenceResult
    last_position: int
    qualifying: tuple[_Qualifying, ...] = ()

    @classmethod
    def start(cls, ingestion: IngestionFacts) -> EvidenceState:
        initial = initial_result(ingestion)
        return cls(
            ingestion=ingestion,
            initial=initial,
            result=initial,
            last_position=ingestion.position,
            qualifying=(),
        )

    def matches_hardware(self, rerun: RerunFacts) -> bool:
        return (
            self.ingestion.product is not None
            and self.ingestion.architecture is not None
            and rerun.product == self.ingestion.product
            and rerun.architecture == self.ingestion.architecture
        )

    def apply(self, event: RunEvent) -> EvidenceState:
        if isinstance(event, IngestionFacts):
            raise EvidencePolicyError(
                f"a run is ingested once; a second ingestion at position {event.position}"
            )
        if event.position <= self.last_position:
            raise EvidencePolicyError(
                f"event at position {event.position} does not follow position "
                f"{self.last_position}: apply events in ledger order"
            )
        moved = replace(self, last_position=event.position)
        if not isinstance(event, RerunFacts):
            return moved  # attestations, reports, requests, lifecycle: never move the level
        if self.ingestion.status != PASSED or not event.accepted:
            return moved
        if not self.matches_hardware(event):
            return moved
        return moved._with_rerun(event)

    def _with_rerun(self, rerun: RerunFacts) -> EvidenceState:
        hardware = f"{rerun.product} ({rerun.architecture})"
        reasons: tuple[str, ...]
        if not rerun.all_cases_correct:
            reasons = (
                f"latest accepted rerun at position {rerun.position} on {hardware} "
                "failed correctness",
            )
            state = replace(self, qualifying=())
            return state._settle(EvidenceLevel.REFUTED, reasons, rerun.position)
        state = self
        claimed = self.ingestion.claimed_ns
        statistic, measured = rerun.measured_for(self.ingestion.primary_statistic)
        note = ""
        if claimed is None:
            note = "the claim has no latency in ns to verify"
        elif measured is None:
            note = "the rerun reports no latency"
        elif _exact(measured) <= _exact(self.ingestion.tolerance) * _exact(claimed):
            entry = _Qualifying(rerun.position, rerun.agent_key_id, rerun.gpu_uuid_hash)
            state = replace(state, qualifying=(*state.qualifying, entry))
        else:
            note = (
                f"too slow: {statistic} {_num(measured)} ns > "
                f"{_num(self.ingestion.tolerance)} × claimed {_num(claimed)} ns"
            )
        tolerance = _num(self.ingestion.tolerance)
        pair = _replicating_pair(state.qualifying)
        if pair is not None:
            reasons = (
                f"{len(state.qualifying)} accepted rerun(s) on {hardware} with all cases "
                f"correct within {tolerance} × the claim",
                f"replicated by the reruns at positions {pair[0].position} and "
                f"{pair[1].position}: distinct agent keys on distinct GPUs",
            )
            return state._settle(EvidenceLevel.REPLICATED, reasons, rerun.position)
        if state.qualifying:
            reasons = (
                f"{len(state.qualifying)} accepted rerun(s) on {hardware} with all cases "
                f"correct within {tolerance} × the claim",
                "not replicated: no two such reruns from distinct agent keys on distinct GPUs",
            )
            return state._settle(EvidenceLevel.VERIFIED, reasons, rerun.position)
        reasons = (
            *self.initial.reasons,
            f"latest accepted rerun at position {rerun.position} on {hardware} had all cases"
            f" correct but does not verify the claim: {note}",
        )
        return state._settle(self.initial.level, reasons, rerun.position)

    def _settle(
        self, level: EvidenceLevel, reasons: tuple[str, ...], position: int
    ) -> EvidenceState:
        # The cause is the event at which the level last changed; reasons always describe now.
        cause = position if level != self.result.level else self.result.caused_by
        return replace(self, result=EvidenceResult(level, reasons, cause))


def evaluate_evidence(events: Iterable[RunEvent]) -> EvidenceResult:
    """The evidence level of one run from all of its events (any kind, any order).

    Events are put in ledger order by ``position`` (positions must be distinct); exactly one
    must be an :class:`IngestionFacts`, and it must come first.
    """
    ordered = sorted(events, key=lambda event: event.position)
    positions = [event.position for event in ordered]
    if len(set(positions)) != len(positions):
        raise EvidencePolicyError("two events share a position")
    ingestions = [event for event in ordered if isinstance(event, IngestionFacts)]
    if len(ingestions) != 1:
        raise EvidencePolicyError(f"a run has exactly one ingestion, found {len(ingestions)}")
    if ordered[0] is not ingestions[0]:
        raise EvidencePolicyError(
            f"an event at position {ordered[0].position} precedes the ingestion"
        )
    state = EvidenceState.start(ingestions[0])
    for event in ordered[1:]:
        state = state.apply(event)
    return state.result


def ingestion_facts_from_manifests(
    position: int,
    run: Mapping[str, Any],
    environment: Mapping[str, Any],
    *,
    has_pinned_source: bool,
    tolerance: float = DEFAULT_TOLERANCE,
    primary: PrimaryMeasurement | None = None,
) -> IngestionFacts:
    """Build :class:`IngestionFacts` from a run and its environment manifest (a convenience).

    Raw evidence: the run's ``spec.evidence`` names logs or raw samples. The claim is the
    primary measurement when it is a latency in ns (see :mod:`domain.comparison`).
    ``has_pinned_source`` is the ingestion's business (an implementation artifact digest).
    ``primary``: the run's :func:`~domain.comparison.readable_primary`, when the caller has
    read it already (it must be exactly that).
    """
    spec = run.get("spec", {})
    evidence = spec.get("evidence") if isinstance(spec, MAPPINGS) else None
    has_raw = isinstance(evidence, MAPPINGS) and any(
        key in evidence for key in ("logs", "rawSamples")
    )
    hardware = environment.get("spec", {}).get("hardware", {})
    if primary is None:
        primary = readable_primary(run)
    claimed = (
        primary.value
        if primary.is_latency and primary.value is not None and primary.value > 0
        else None
    )
    return IngestionFacts(
        position=position,
        status=str(spec.get("status")),
        has_pinned_source=has_pinned_source,
        has_raw_evidence=has_raw,
        product=hardware.get("product"),
        architecture=hardware.get("architecture"),
        primary_statistic=primary.statistic,
        claimed_ns=claimed,
        tolerance=tolerance,
    )
