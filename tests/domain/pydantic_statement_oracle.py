"""The statement models as they were before they became msgspec Structs: pydantic, kept
ONLY as the test oracle of tests/domain/test_statement_structs.py (the Structs must accept
exactly what these accepted, with equal field values). Product code must not import this
module; it is a verbatim copy of domain/statement_models/*.py at the change, one file.
"""

# ruff: noqa
# mypy: ignore-errors

from __future__ import annotations

import math
import re
import statistics
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from domain.canonical import canonical_b64decode
from domain.statements import (
    BUILD_LANGUAGES,
    DEFENCE_NAMES,
    MAX_DEFENCES,
    MAX_LEASE_SECONDS,
    MAX_RERUN_SAMPLES,
    MEASURING_BACKENDS,
    MIN_LEASE_SECONDS,
    RERUN_CLOCK_KEYS,
    STORED,
    TEST_BACKENDS,
    TIMER_REFERENCES,
    AttestationType,
    CaseStatus,
    DefenceOutcome,
    JobFailure,
    KeyAction,
    LifecycleAction,
    PredicateType,
    ReportReason,
    Role,
    RoundLabel,
    StatementError,
    StopRule,
    TimerName,
    is_case_reason,
)
from domain.timestamps import parse_time


# --- common.py ------------------------------------------------------------
def _rfc3339(value: str) -> str:
    parse_time(value)
    return value


# Signed text may not carry characters that change how it displays without being seen:
# Unicode's format characters (bidirectional overrides and isolates, zero-width joiners and
# spaces, tag characters, the soft hyphen...: category Cf), controls other than tab,
# newline and carriage return (Cc), line and paragraph separators (Zl, Zp), surrogates and
# private-use characters. In a label, a note or a link they make text read as something
# other than what it is (a URL that displays as another, "Trojan Source").
_ASCII_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})
_ALLOWED_CONTROLS = frozenset("\t\n\r")


def _visible(value: str) -> str:
    if value.isascii():  # the common case, at regex speed
        found = _ASCII_CONTROL.search(value)
        hidden = found.group() if found is not None else None
    else:
        hidden = next(
            (
                c
                for c in value
                if c not in _ALLOWED_CONTROLS and unicodedata.category(c) in _HIDDEN_CATEGORIES
            ),
            None,
        )
    if hidden is not None:
        raise ValueError(
            f"must not contain the invisible or bidirectional control character U+{ord(hidden):04X}"
        )
    return value


def _https_url(value: str) -> str:
    if not value.startswith("https://") or len(value) <= len("https://"):
        raise ValueError("must be an https:// URL")
    # Printable ASCII only: a link reads as what it is (non-ASCII is percent-encoded).
    if not all("!" <= c <= "~" for c in value):
        raise ValueError("must be printable ASCII without spaces (percent-encode the rest)")
    return value


# Free text a signer writes: bounded, and without hidden or bidirectional controls.
VISIBLE = AfterValidator(_visible)


Timestamp = Annotated[StrictStr, AfterValidator(_rfc3339)]
HttpsUrl = Annotated[StrictStr, Field(max_length=2000), AfterValidator(_https_url)]
Sha256Hex = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
Digest = Annotated[StrictStr, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
KeyId = Digest
Slug = Annotated[StrictStr, Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=100)]


class StrictModel(BaseModel):
    # Strict: a JSON string is never coerced into a number or bool. Enum fields opt out
    # (Field(strict=False)) only so that their JSON string values are accepted.
    # defer_build: a predicate type's validator is built when first used (start-up time).
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class SignedPredicate(StrictModel):
    """Every predicate says when its signer issued it (checked against the key's validity)."""

    issuedAt: Timestamp


def admitting(info: ValidationInfo) -> bool:
    """Whether this validation is of a new predicate (admission, or an agent before it signs),
    where only the vocabulary is accepted; False when reading a stored one."""
    return not (isinstance(info.context, Mapping) and info.context.get(STORED))


def describe(exc: ValidationError, prefix: str) -> str:
    parts = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"])
        msg = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        parts.append(f"{prefix}{loc}: {msg}" if loc else f"{prefix.rstrip('.')}: {msg}")
    return "; ".join(parts)


Predicate = TypeVar("Predicate", bound=SignedPredicate)


def validate_predicate(
    model: type[Predicate], fields: Mapping[str, Any], *, stored: bool
) -> Predicate:
    """``fields`` through ``model``, its errors as one :class:`StatementError`."""
    try:
        return model.model_validate(fields, context={STORED: True} if stored else None)
    except ValidationError as exc:
        raise StatementError(describe(exc, "predicate.")) from None


# --- statement.py ------------------------------------------------------------
class Subject(StrictModel):
    name: Annotated[StrictStr, Field(min_length=1, max_length=500), VISIBLE]
    # Exactly {"sha256": hex}: an empty object passed, and every reader of the digest
    # failed with a KeyError (the verifier, and a 500 from the API; an attack review).
    digest: Annotated[dict[Literal["sha256"], Sha256Hex], Field(min_length=1)]


class Statement(StrictModel):
    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: Annotated[list[Subject], Field(min_length=1, max_length=1)]
    predicateType: Annotated[PredicateType, Field(strict=False)]
    predicate: dict[str, Any]

    @property
    def subject_digest(self) -> str:
        return "sha256:" + self.subject[0].digest["sha256"]

    @property
    def subject_name(self) -> str:
        return self.subject[0].name


def parse_statement(value: object) -> Statement:
    try:
        return Statement.model_validate(value)
    except ValidationError as exc:
        raise StatementError("statement " + describe(exc, "")) from None


# --- ingestion.py ------------------------------------------------------------
class ManifestSet(StrictModel):
    run: dict[str, Any]
    protocol: dict[str, Any]
    environment: dict[str, Any]
    implementation: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None


class IngestionPredicate(SignedPredicate):
    source: Slug
    externalId: Annotated[StrictStr, Field(max_length=500), VISIBLE] | None = None
    fetchedAt: Timestamp
    manifests: ManifestSet
    sourceNative: dict[str, Any] | None = None
    # sha256 of the raw bytes the importer read (API response, file), so the mapping is auditable.
    snapshotDigest: Digest | None = None
    # When the source itself published the result, and the source's own name for itself
    # (the KernelIndex catalog states both): facts of the source, apart from ``fetchedAt``
    # (when the importer read it) and the ledger's own receipt time. Optional: runs signed
    # before these fields existed stay valid.
    publishedAt: Timestamp | None = None
    sourceName: Annotated[StrictStr, Field(min_length=1, max_length=200), VISIBLE] | None = None


class AttachedManifests(StrictModel):
    """Manifests a run names by digest but was ingested without (a leaderboard import often
    has only the digests; the catalog or a later import brings the documents)."""

    implementation: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> AttachedManifests:
        if self.implementation is None and self.workload is None:
            raise ValueError("an attachment carries an implementation or a workload manifest")
        return self


class AttachmentPredicate(SignedPredicate):
    manifests: AttachedManifests


# --- attestation.py ------------------------------------------------------------
class AttestationPredicate(SignedPredicate):
    type: Annotated[AttestationType, Field(strict=False)]
    body: Annotated[StrictStr, Field(min_length=1, max_length=2000), VISIBLE]
    observedNs: Annotated[StrictInt, Field(ge=0, le=2**53 - 1)] | None = None
    environmentSummary: Annotated[StrictStr, Field(max_length=500), VISIBLE] | None = None
    evidenceUrl: HttpsUrl | None = None
    reason: Annotated[ReportReason, Field(strict=False)] | None = None

    @model_validator(mode="after")
    def _reason_with_reports(self) -> AttestationPredicate:
        if (self.reason is not None) != (self.type is AttestationType.ISSUE_REPORT):
            raise ValueError("an issue_report names its reason, and only an issue_report does")
        return self


# --- keys.py ------------------------------------------------------------
def _canonical_b64(text: str) -> str:
    # One key, one spelling: "...F4=" and "...F5=" decode alike but sign differently.
    canonical_b64decode(text, "publicKey")
    return text


Architecture = Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=50)]


class KeyDevice(StrictModel):
    """A device class an agent key may measure on: a GPU (backend ``cuda``, its product and
    architecture) or a test backend (its name alone)."""

    backend: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_-]*$", max_length=50)]
    product: Annotated[StrictStr, Field(min_length=1, max_length=200), VISIBLE] | None = None
    architecture: Architecture | None = None

    @model_validator(mode="after")
    def _known_backend(self) -> KeyDevice:
        hardware = (self.product, self.architecture)
        if self.backend in MEASURING_BACKENDS:
            if None in hardware:
                raise ValueError(f"a {self.backend} device class names product and architecture")
        elif self.backend in TEST_BACKENDS:
            if hardware != (None, None):
                raise ValueError("a test backend names no product or architecture")
        else:
            known = ", ".join(sorted(MEASURING_BACKENDS | TEST_BACKENDS))
            raise ValueError(f"unknown backend {self.backend!r}: one of {known}")
        return self


class KeyPredicate(SignedPredicate):
    action: Annotated[KeyAction, Field(strict=False)]
    keyId: KeyId
    # Canonical standard base64 of the raw 32-byte Ed25519 public key.
    publicKey: Annotated[
        StrictStr, Field(pattern=r"^[A-Za-z0-9+/]{43}=$"), AfterValidator(_canonical_b64)
    ]
    # Required to register; a revocation names the key by keyId and publicKey only.
    roles: (
        Annotated[list[Annotated[Role, Field(strict=False)]], Field(min_length=1, max_length=5)]
        | None
    ) = None
    validFrom: Timestamp | None = None
    validUntil: Timestamp | None = None
    reason: Annotated[StrictStr, Field(max_length=2000), VISIBLE] | None = None
    label: Annotated[StrictStr, Field(max_length=200), VISIBLE] | None = None
    # An agent key's device classes (domain.rerun_binding): what it may claim and report on.
    devices: Annotated[list[KeyDevice], Field(min_length=1, max_length=64)] | None = None

    @model_validator(mode="after")
    def _devices_with_agents(self) -> KeyPredicate:
        if self.devices is None:
            return self  # an agent registration without them is refused at admission
        if self.action is not KeyAction.REGISTER or Role.AGENT not in (self.roles or ()):
            raise ValueError("only an agent key's registration names device classes")
        seen = [(d.backend, d.product, d.architecture) for d in self.devices]
        if len(set(seen)) != len(seen):
            raise ValueError("devices must not name a device class twice")
        if len({d.backend in MEASURING_BACKENDS for d in self.devices}) > 1:
            raise ValueError(
                "a key names GPU device classes or test backends, never both: a key that runs "
                "code on a test backend must not be able to sign GPU results (use one key each)"
            )
        return self


# --- lifecycle.py ------------------------------------------------------------
class LifecyclePredicate(SignedPredicate):
    action: Annotated[LifecycleAction, Field(strict=False)]
    reason: Annotated[StrictStr, Field(min_length=1, max_length=2000), VISIBLE]
    supersededBy: Digest | None = None


# --- rerun.py ------------------------------------------------------------
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
