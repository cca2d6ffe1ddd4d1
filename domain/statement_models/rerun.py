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

from pydantic import (
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationInfo,
    model_validator,
)

from domain.statement_models.common import (
    VISIBLE,
    Digest,
    Sha256Hex,
    SignedPredicate,
    StrictModel,
    Timestamp,
    admitting,
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

Uint53 = Annotated[StrictInt, Field(ge=0, le=2**53 - 1)]
# Numbers are strict: a JSON number (an integer is one), never a string or a boolean —
# the folds read the signed predicate as it is, so what admission takes must be numbers.
Nanoseconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
JobId = Annotated[
    StrictStr, Field(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
]
Nonce = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
Label = Annotated[StrictStr, Field(min_length=1, max_length=200), VISIBLE]
DefenceName = Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9-]*$", max_length=60)]
ShortText = Annotated[StrictStr, Field(max_length=500), VISIBLE]
# A version, a target or a flag: one printable ASCII token, no spaces.
_TOKEN = re.compile(r"[!-~]{1,200}")


class HardwareRequirement(StrictModel):
    product: Label
    architecture: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=50)]


class RerunDevice(StrictModel):
    product: Label
    architecture: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=50)]
    gpuUuidHash: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
    backend: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_-]*$", max_length=50)]


class RerunRequestPredicate(SignedPredicate):
    """An admin asks for a controlled rerun of the subject run on given hardware."""

    jobId: JobId
    # Seeds one correctness round; unknown to the submitter before the job exists.
    nonce: Nonce
    runDigest: Digest
    artifactDigest: Digest
    workloadDigest: Digest
    requirements: HardwareRequirement
    expiresAt: Timestamp


class RerunClaimPredicate(SignedPredicate):
    """An agent takes an open rerun job for a while (its lease), on the device it names."""

    jobId: JobId
    runDigest: Digest
    leaseSeconds: Annotated[StrictInt, Field(ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)]
    device: RerunDevice


class LatencyStats(StrictModel):
    @model_validator(mode="after")
    def _ordered(self) -> LatencyStats:
        if self.ci95[0] > self.ci95[1] or self.minimum > self.maximum:
            raise ValueError("ci95 and minimum/maximum must be ordered low <= high")
        return self

    median: Nanoseconds
    mean: Nanoseconds
    p05: Nanoseconds
    p95: Nanoseconds
    minimum: Nanoseconds
    maximum: Nanoseconds
    mad: Nanoseconds
    ci95: Annotated[list[Nanoseconds], Field(min_length=2, max_length=2)]


class RerunDefence(StrictModel):
    """One reward-hack defence the agent ran on a case, and what it found."""

    name: DefenceName
    outcome: Annotated[DefenceOutcome, Field(strict=False)]
    # Free text, in results admitted before the vocabulary only (a new one is refused).
    detail: ShortText | None = None
    checks: Uint53 | None = None  # how many times it ran on the case

    @model_validator(mode="after")
    def _vocabulary(self, info: ValidationInfo) -> RerunDefence:
        if admitting(info):
            if self.name not in DEFENCE_NAMES:
                raise ValueError("name must be one of the defences of the rerun vocabulary")
            if self.detail is not None:
                raise ValueError("detail is free text, which a new result may not carry")
        return self


class TimerCrossCheck(StrictModel):
    """The timed calls measured twice: by the timer, and by a host clock around a
    synchronised call (work on another stream or thread shows up as wall ≫ timed)."""

    timer: Label  # e.g. "perf_counter_ns", "cuda-events"
    reference: Label  # e.g. "CLOCK_MONOTONIC_RAW around a synchronised call"
    calls: Uint53
    timedNs: Nanoseconds
    wallNs: Nanoseconds
    ratio: Annotated[float, Field(ge=0, allow_inf_nan=False)]  # wallNs / timedNs
    otherThreadsCpuNs: Nanoseconds | None = None
    outcome: Annotated[DefenceOutcome, Field(strict=False)]

    @model_validator(mode="after")
    def _vocabulary(self, info: ValidationInfo) -> TimerCrossCheck:
        if admitting(info) and (
            self.timer not in {t.value for t in TimerName} or self.reference not in TIMER_REFERENCES
        ):
            raise ValueError("timer and reference must be named from the rerun vocabulary")
        return self


class RerunCase(StrictModel):
    case: Annotated[StrictStr, Field(min_length=1, max_length=200), VISIBLE]
    status: Annotated[CaseStatus, Field(strict=False)]
    maxAbsError: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    maxRelError: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    latencyNs: LatencyStats | None = None
    samples: Uint53 | None = None
    # A CaseReason or reward-hack:<defence> (free text only in results admitted before).
    reason: Annotated[StrictStr, Field(max_length=2000), VISIBLE] | None = None
    # Optional (older results have neither): every defence that ran, and the timer check.
    defences: Annotated[list[RerunDefence], Field(max_length=MAX_DEFENCES)] | None = None
    timerCrossCheck: TimerCrossCheck | None = None
    # What the agent computed about the case, typed (never the child's words).
    round: Annotated[RoundLabel, Field(strict=False)] | None = None  # the round that failed
    stoppedBy: Annotated[StopRule, Field(strict=False)] | None = None
    floorNs: Nanoseconds | None = None  # the roofline floor the median was held to

    @model_validator(mode="after")
    def _vocabulary(self, info: ValidationInfo) -> RerunCase:
        if not admitting(info) or self.reason is None:
            return self
        if self.status is CaseStatus.PASSED:
            raise ValueError("a passed case carries no reason")
        if not is_case_reason(self.reason):
            # Never echo the text: it may be what a solution wanted published.
            raise ValueError(
                "reason must be a word of the rerun vocabulary (a CaseReason, or "
                "reward-hack:<defence>), not free text"
            )
        return self

    @model_validator(mode="after")
    def _cheats_never_pass(self) -> RerunCase:
        failed = [d.name for d in self.defences or () if d.outcome is DefenceOutcome.FAILED]
        if self.timerCrossCheck is not None and (
            self.timerCrossCheck.outcome is DefenceOutcome.FAILED
        ):
            failed.append("timer-cross-check")
        if failed and self.status is CaseStatus.PASSED:
            raise ValueError(f"a case whose defences failed ({', '.join(failed)}) cannot pass")
        return self


class RerunBuild(StrictModel):
    """How the agent built and ran the solution: its kind, the runtime versions, the flags."""

    solutionKind: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_-]*$", max_length=50)]
    language: Label | None = None
    runtime: Annotated[
        dict[Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_.-]*$", max_length=50)], ShortText],
        Field(max_length=32),
    ] = Field(default_factory=dict)
    flags: Annotated[list[ShortText], Field(max_length=64)] = Field(default_factory=list)

    @model_validator(mode="after")
    def _vocabulary(self, info: ValidationInfo) -> RerunBuild:
        if not admitting(info):
            return self
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
        return self


class RerunSummary(StrictModel):
    allCorrect: StrictBool
    medianNs: Nanoseconds | None = None
    meanNs: Nanoseconds | None = None
    ci95Ns: Annotated[list[Nanoseconds], Field(min_length=2, max_length=2)] | None = None
    samples: Uint53
    # The suite latency of every timed sample, so rankings can bootstrap from the events.
    # Bounded: the projection bootstraps over them (cost grows with the count).
    samplesNs: Annotated[list[Nanoseconds], Field(max_length=MAX_RERUN_SAMPLES)] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> RerunSummary:
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
        return self


class RerunEnvironment(StrictModel):
    product: Label
    architecture: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=50)]
    # sha256 of the GPU UUID: distinguishes GPUs without publishing their serials.
    gpuUuidHash: Sha256Hex
    backend: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_-]*$", max_length=50)]
    driver: Annotated[StrictStr, Field(max_length=100), VISIBLE] | None = None
    cuda: Annotated[StrictStr, Field(max_length=100), VISIBLE] | None = None
    clocks: dict[str, Annotated[float, Field(allow_inf_nan=False)]] | None = None
    temperatureC: dict[str, Annotated[float, Field(allow_inf_nan=False)]] | None = None

    @model_validator(mode="after")
    def _clock_names(self, info: ValidationInfo) -> RerunEnvironment:
        # Stored results admitted before this rule still read (their keys were free).
        if admitting(info) and self.clocks and not set(self.clocks) <= RERUN_CLOCK_KEYS:
            raise ValueError(
                "clocks keys must be <clock>.<when> of the rerun vocabulary "
                f"({', '.join(sorted(RERUN_CLOCK_KEYS))})"
            )
        return self


class RerunPredicate(SignedPredicate):
    """An agent's measured result for a rerun job (protocol kernelindex-rerun-v1)."""

    jobId: JobId
    nonce: Nonce
    protocol: Literal["kernelindex-rerun-v1"]
    cases: Annotated[list[RerunCase], Field(min_length=1, max_length=1000)]
    summary: RerunSummary
    environment: RerunEnvironment
    calibration: dict[str, Annotated[float, Field(allow_inf_nan=False)]]
    # "failed": the job could not be measured (build error, device fault...); it closes the
    # job with its reason and moves no evidence. "completed": measured, pass or fail.
    outcome: Literal["completed", "failed"] = "completed"
    # A JobFailure (free text only in results admitted before the vocabulary).
    failure: Annotated[StrictStr, Field(min_length=1, max_length=2000), VISIBLE] | None = None
    build: RerunBuild | None = None  # optional: older results do not record it

    @model_validator(mode="after")
    def _failure_has_reason(self, info: ValidationInfo) -> RerunPredicate:
        if (self.outcome == "failed") != (self.failure is not None):
            raise ValueError("a failed rerun needs a failure reason, and only a failed one has it")
        if (
            admitting(info)
            and self.failure is not None
            and self.failure not in {f.value for f in JobFailure}
        ):
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
        return self
