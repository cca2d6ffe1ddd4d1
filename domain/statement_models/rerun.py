"""The rerun predicates: an admin's request for a controlled rerun, an agent's claim of the
job, and the agent's measured result (protocol ``kernelindex-rerun-v1``).

The result's words are the rerun vocabulary of :mod:`domain.statements`; a result read from
the log (``stored``) keeps the free text admitted before the vocabulary.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from domain.statement_models.common import (
    Digest,
    Finite,
    NonNegative,
    Sha256Hex,
    SignedPredicate,
    StrictModel,
    Uint53,
    admitting,
    each,
    rfc3339,
    visible,
)
from domain.statements import (
    BUILD_LANGUAGES,
    DEFENCE_NAMES,
    MAX_DEFENCES,
    MAX_LEASE_SECONDS,
    MAX_RERUN_SAMPLES,
    MIN_LEASE_SECONDS,
    RERUN_CLOCK_KEYS,
    TIMER_REFERENCES,
    CaseStatus,
    DefenceOutcome,
    JobFailure,
    RoundLabel,
    StopRule,
    TimerName,
    is_case_reason,
)

# Numbers are strict: a JSON number (an integer is one), never a string or a boolean —
# the folds read the signed predicate as it is, so what admission takes must be numbers.
Nanoseconds = NonNegative
JobId = Annotated[
    str, Meta(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
]
Nonce = Sha256Hex
Label = Annotated[str, Meta(min_length=1, max_length=200)]  # and visible
Architecture = Annotated[str, Meta(pattern=r"^[a-z][a-z0-9_]*\Z", max_length=50)]
Backend = Annotated[str, Meta(pattern=r"^[a-z][a-z0-9_-]*\Z", max_length=50)]
DefenceName = Annotated[str, Meta(pattern=r"^[a-z][a-z0-9-]*\Z", max_length=60)]
ShortText = Annotated[str, Meta(max_length=500)]  # and visible
# A version, a target or a flag: one printable ASCII token, no spaces.
_TOKEN = re.compile(r"[!-~]{1,200}")
_TIMER_NAMES = frozenset(t.value for t in TimerName)
_JOB_FAILURES = frozenset(f.value for f in JobFailure)


class HardwareRequirement(StrictModel, frozen=True):
    product: Label
    architecture: Architecture

    _field_checks = (("product", visible),)


class RerunDevice(StrictModel, frozen=True):
    product: Label
    architecture: Architecture
    gpuUuidHash: Sha256Hex
    backend: Backend

    _field_checks = (("product", visible),)


class RerunRequestPredicate(SignedPredicate, kw_only=True, frozen=True):
    """An admin asks for a controlled rerun of the subject run on given hardware."""

    jobId: JobId
    # Seeds one correctness round; unknown to the submitter before the job exists.
    nonce: Nonce
    runDigest: Digest
    artifactDigest: Digest
    workloadDigest: Digest
    requirements: HardwareRequirement
    expiresAt: str

    _field_checks = (*SignedPredicate._field_checks, ("expiresAt", rfc3339))


class RerunClaimPredicate(SignedPredicate, kw_only=True, frozen=True):
    """An agent takes an open rerun job for a while (its lease), on the device it names."""

    jobId: JobId
    runDigest: Digest
    leaseSeconds: Annotated[int, Meta(ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)]
    device: RerunDevice


class LatencyStats(StrictModel, frozen=True):
    median: Nanoseconds
    mean: Nanoseconds
    p05: Nanoseconds
    p95: Nanoseconds
    minimum: Nanoseconds
    maximum: Nanoseconds
    mad: Nanoseconds
    ci95: Annotated[list[Nanoseconds], Meta(min_length=2, max_length=2)]

    def validate(self) -> None:
        if self.ci95[0] > self.ci95[1] or self.minimum > self.maximum:
            raise ValueError("ci95 and minimum/maximum must be ordered low <= high")


class RerunDefence(StrictModel, kw_only=True, frozen=True):
    """One reward-hack defence the agent ran on a case, and what it found."""

    name: DefenceName
    outcome: DefenceOutcome
    # Free text, in results admitted before the vocabulary only (a new one is refused).
    detail: ShortText | None = None
    checks: Uint53 | None = None  # how many times it ran on the case

    _field_checks = (("detail", visible),)

    def validate(self) -> None:
        if admitting():
            if self.name not in DEFENCE_NAMES:
                raise ValueError("name must be one of the defences of the rerun vocabulary")
            if self.detail is not None:
                raise ValueError("detail is free text, which a new result may not carry")


class TimerCrossCheck(StrictModel, kw_only=True, frozen=True):
    """The timed calls measured twice: by the timer, and by a host clock around a
    synchronised call (work on another stream or thread shows up as wall ≫ timed)."""

    timer: Label  # e.g. "perf_counter_ns", "cuda-events"
    reference: Label  # e.g. "CLOCK_MONOTONIC_RAW around a synchronised call"
    calls: Uint53
    timedNs: Nanoseconds
    wallNs: Nanoseconds
    ratio: NonNegative  # wallNs / timedNs
    otherThreadsCpuNs: Nanoseconds | None = None
    outcome: DefenceOutcome

    _field_checks = (("timer", visible), ("reference", visible))

    def validate(self) -> None:
        if admitting() and (
            self.timer not in _TIMER_NAMES or self.reference not in TIMER_REFERENCES
        ):
            raise ValueError("timer and reference must be named from the rerun vocabulary")


class RerunCase(StrictModel, kw_only=True, frozen=True):
    case: Annotated[str, Meta(min_length=1, max_length=200)]
    status: CaseStatus
    maxAbsError: NonNegative | None = None
    maxRelError: NonNegative | None = None
    latencyNs: LatencyStats | None = None
    samples: Uint53 | None = None
    # A CaseReason or reward-hack:<defence> (free text only in results admitted before).
    reason: Annotated[str, Meta(max_length=2000)] | None = None
    # Optional (older results have neither): every defence that ran, and the timer check.
    defences: Annotated[list[RerunDefence], Meta(max_length=MAX_DEFENCES)] | None = None
    timerCrossCheck: TimerCrossCheck | None = None
    # What the agent computed about the case, typed (never the child's words).
    round: RoundLabel | None = None  # the round that failed
    stoppedBy: StopRule | None = None
    floorNs: Nanoseconds | None = None  # the roofline floor the median was held to

    _field_checks = (("case", visible), ("reason", visible))

    def validate(self) -> None:
        if admitting() and self.reason is not None:
            if self.status is CaseStatus.PASSED:
                raise ValueError("a passed case carries no reason")
            if not is_case_reason(self.reason):
                # Never echo the text: it may be what a solution wanted published.
                raise ValueError(
                    "reason must be a word of the rerun vocabulary (a CaseReason, or "
                    "reward-hack:<defence>), not free text"
                )
        failed = [d.name for d in self.defences or () if d.outcome is DefenceOutcome.FAILED]
        if self.timerCrossCheck is not None and (
            self.timerCrossCheck.outcome is DefenceOutcome.FAILED
        ):
            failed.append("timer-cross-check")
        if failed and self.status is CaseStatus.PASSED:
            raise ValueError(f"a case whose defences failed ({', '.join(failed)}) cannot pass")


class RerunBuild(StrictModel, kw_only=True, frozen=True):
    """How the agent built and ran the solution: its kind, the runtime versions, the flags."""

    solutionKind: Backend
    language: Label | None = None
    runtime: Annotated[
        dict[Annotated[str, Meta(pattern=r"^[a-z][a-z0-9_.-]*\Z", max_length=50)], ShortText],
        Meta(max_length=32),
    ] = msgspec.field(default_factory=dict)
    flags: Annotated[list[ShortText], Meta(max_length=64)] = msgspec.field(default_factory=list)

    _field_checks = (("language", visible), ("runtime", each(visible)), ("flags", each(visible)))

    def validate(self) -> None:
        if not admitting():
            return
        # A list of SOL's names ("pytorch, triton"), or the declarative binding's one label,
        # which holds a comma of its own.
        if (
            self.language is not None
            and self.language not in BUILD_LANGUAGES
            and not set(self.language.split(", ")) <= BUILD_LANGUAGES
        ):
            raise ValueError("language must list languages of the rerun vocabulary")
        tokens = [*self.runtime.values(), *self.flags]
        if not all(_TOKEN.fullmatch(token) for token in tokens):
            raise ValueError("runtime versions and flags must be single printable tokens")


class RerunSummary(StrictModel, kw_only=True, frozen=True):
    allCorrect: bool
    medianNs: Nanoseconds | None = None
    meanNs: Nanoseconds | None = None
    ci95Ns: Annotated[list[Nanoseconds], Meta(min_length=2, max_length=2)] | None = None
    samples: Uint53
    # The suite latency of every timed sample, so rankings can bootstrap from the events.
    # Bounded: the projection bootstraps over them (cost grows with the count).
    samplesNs: Annotated[list[Nanoseconds], Meta(max_length=MAX_RERUN_SAMPLES)] | None = None

    def validate(self) -> None:
        if self.ci95Ns is not None and self.ci95Ns[0] > self.ci95Ns[1]:
            raise ValueError("ci95Ns must be [low, high] with low <= high")
        if self.samplesNs:
            # Ranking reads the samples, the evidence policy the median: they must agree.
            if self.medianNs is None or not math.isclose(
                statistics.median(self.samplesNs), self.medianNs, rel_tol=1e-9, abs_tol=0.5
            ):
                raise ValueError("medianNs must be the median of samplesNs")
            if len(self.samplesNs) != self.samples:
                raise ValueError("samples must equal the number of samplesNs")


class RerunEnvironment(StrictModel, kw_only=True, frozen=True):
    product: Label
    architecture: Architecture
    # sha256 of the GPU UUID: distinguishes GPUs without publishing their serials.
    gpuUuidHash: Sha256Hex
    backend: Backend
    driver: Annotated[str, Meta(max_length=100)] | None = None
    cuda: Annotated[str, Meta(max_length=100)] | None = None
    clocks: dict[str, Finite] | None = None
    temperatureC: dict[str, Finite] | None = None

    _field_checks = (("product", visible), ("driver", visible), ("cuda", visible))

    def validate(self) -> None:
        # Stored results admitted before this rule still read (their keys were free).
        if admitting() and self.clocks and not set(self.clocks) <= RERUN_CLOCK_KEYS:
            raise ValueError(
                "clocks keys must be <clock>.<when> of the rerun vocabulary "
                f"({', '.join(sorted(RERUN_CLOCK_KEYS))})"
            )


class RerunPredicate(SignedPredicate, kw_only=True, frozen=True):
    """An agent's measured result for a rerun job (protocol kernelindex-rerun-v1)."""

    jobId: JobId
    nonce: Nonce
    protocol: Literal["kernelindex-rerun-v1"]
    cases: Annotated[list[RerunCase], Meta(min_length=1, max_length=1000)]
    summary: RerunSummary
    environment: RerunEnvironment
    calibration: dict[str, Finite]
    # "failed": the job could not be measured (build error, device fault...); it closes the
    # job with its reason and moves no evidence. "completed": measured, pass or fail.
    outcome: Literal["completed", "failed"] = "completed"
    # A JobFailure (free text only in results admitted before the vocabulary).
    failure: Annotated[str, Meta(min_length=1, max_length=2000)] | None = None
    build: RerunBuild | None = None  # optional: older results do not record it

    _field_checks = (*SignedPredicate._field_checks, ("failure", visible))

    def validate(self) -> None:
        if (self.outcome == "failed") != (self.failure is not None):
            raise ValueError("a failed rerun needs a failure reason, and only a failed one has it")
        if admitting() and self.failure is not None and self.failure not in _JOB_FAILURES:
            raise ValueError("failure must be a JobFailure of the rerun vocabulary, not free text")
        # The evidence policy reads the summary; the cases are what was measured.
        passed = all(case.status is CaseStatus.PASSED for case in self.cases)
        if self.summary.allCorrect != passed:
            raise ValueError(
                "summary.allCorrect must say whether every case passed "
                f"({'they all did' if passed else 'not every case passed'})"
            )
        if self.summary.allCorrect and self.outcome == "failed":
            raise ValueError("a failed rerun cannot be all correct")
