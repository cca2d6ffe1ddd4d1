"""The manifest models as they were before they became msgspec Structs: pydantic, kept
ONLY as the test oracle of tests/domain/test_manifest_structs.py (the Structs must accept
exactly what these accepted). A deliberate test-only copy: product code must not import this
module; it is domain/manifests/models/*.py at the change (common first, then each kind), one
file, with ``MODELS`` (kind -> model) and ``accepts`` added at the end.
"""

# ruff: noqa
# mypy: ignore-errors

from annotated_types import Ge, Gt, Le
from annotated_types import Len, MaxLen
from annotated_types import MaxLen
from annotated_types import MinLen
from domain.manifests.kinds import ECMA_WHITESPACE
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainValidator,
    StringConstraints,
    ValidationError,
    field_validator,
)
from pydantic import StringConstraints
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError
from typing import Annotated, Any, Final, Literal, TypeGuard
from typing import Annotated, Literal
from typing import Literal
import math
import re

# --- common ------------------------------------------------------------------------------------
ApiVersion = Literal["kernelindex.dev/v1alpha1"]

MAX_SAFE_INTEGER: Final = 9007199254740991  # 2**53 - 1, the schemas' integer bound


def ascii_digits(pattern: str) -> str:
    """Spell the ECMA-262 ``\\d`` (ASCII digits) so that the Rust regex engine agrees."""
    return pattern.replace("\\d", "[0-9]")


# --- patterns, verbatim from the schemas -------------------------------------------------------

IDENTIFIER_PATTERN: Final = r"^[a-z][a-z0-9_]*$"
OBJECT_NAME_PATTERN: Final = r"^[a-z0-9][a-z0-9._-]*$"
SLUG_PATTERN: Final = r"^[a-z0-9][a-z0-9-]*$"
SHA256_DIGEST_PATTERN: Final = r"^sha256:[0-9a-f]{64}$"
GIT_COMMIT_PATTERN: Final = r"^[0-9a-f]{40}$"
DURATION_PATTERN: Final = r"^\d+(\.\d+)?\s?(ns|us|µs|ms|s)$"
SCHEMA_TIMESTAMP_PATTERN: Final = (
    r"^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29"
    r"|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)"
    r"|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:Z))$"
)
TIMESTAMP_PATTERN: Final = ascii_digits(SCHEMA_TIMESTAMP_PATTERN)

# DURATION_PATTERN for Python's ``re`` (used with ``fullmatch``, so no anchors are needed).
_DURATION_TEXT: Final = re.compile(
    ascii_digits(r"\d+(?:\.\d+)?") + ECMA_WHITESPACE + "?(?:ns|us|\u00b5s|ms|s)"
)
_IDENTIFIER_TEXT: Final = re.compile(r"[a-z][a-z0-9_]*")

# Friendlier words for patterns too long to quote in an error message.
PATTERN_DESCRIPTIONS: Final = {
    TIMESTAMP_PATTERN: "must be a UTC date-time like 2026-08-22T11:05:31.586Z",
}


# --- base model --------------------------------------------------------------------------------


class StrictModel(BaseModel):
    """An object with ``additionalProperties: false``: camelCase JSON names, strict types."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        regex_engine="rust-regex",
        # Each model's validator is built when it first validates: a command that checks a
        # run's manifests never pays for the serving kinds (kernelindex show starts faster).
        defer_build=True,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _reject_null(cls, value: object) -> object:
        # The schemas never allow null; an optional field is either absent or a real value.
        if value is None:
            raise PydanticCustomError("null_value", "must not be null")
        return value


# --- scalars -----------------------------------------------------------------------------------


def _is_json_integer(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


def _json_integer(value: object) -> object:
    """JSON Schema ``integer``: an int or an integral float, never a bool or a string."""
    if not _is_json_integer(value):
        raise PydanticCustomError("json_integer", "must be an integer")
    return int(value)


def _is_json_number(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _json_number(value: object) -> int | float:
    """JSON Schema ``number``: an int or a finite float, never a bool or a string."""
    if not _is_json_number(value):
        raise PydanticCustomError("json_number", "must be a number")
    return value


_Integer = Annotated[int, BeforeValidator(_json_integer)]
SafeInteger = Annotated[_Integer, Ge(-MAX_SAFE_INTEGER), Le(MAX_SAFE_INTEGER)]
NonNegativeInteger = Annotated[_Integer, Ge(0), Le(MAX_SAFE_INTEGER)]
PositiveInteger = Annotated[_Integer, Gt(0), Le(MAX_SAFE_INTEGER)]

Number = Annotated[float, PlainValidator(_json_number)]
NonNegativeNumber = Annotated[Number, Ge(0)]
PositiveNumber = Annotated[Number, Gt(0)]
Fraction = Annotated[Number, Ge(0), Le(1)]

Text50 = Annotated[str, StringConstraints(max_length=50)]
Text100 = Annotated[str, StringConstraints(max_length=100)]
Text120 = Annotated[str, StringConstraints(max_length=120)]
Text200 = Annotated[str, StringConstraints(max_length=200)]
Text500 = Annotated[str, StringConstraints(max_length=500)]
Text1000 = Annotated[str, StringConstraints(max_length=1000)]
Text2000 = Annotated[str, StringConstraints(max_length=2000)]

Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
"""Lower snake case: enum-like open vocabularies (dtype, timer, vendor...) and map keys."""
ObjectName = Annotated[str, StringConstraints(max_length=200, pattern=OBJECT_NAME_PATTERN)]
Slug = Annotated[str, StringConstraints(max_length=100, pattern=SLUG_PATTERN)]
Sha256Digest = Annotated[str, StringConstraints(pattern=SHA256_DIGEST_PATTERN)]
GitCommit = Annotated[str, StringConstraints(pattern=GIT_COMMIT_PATTERN)]
Timestamp = Annotated[str, StringConstraints(pattern=TIMESTAMP_PATTERN)]
"""The schemas' ``format: date-time`` is an annotation only in Draft 2020-12; the pattern rules."""

AxisValues = dict[Identifier, SafeInteger]


# --- anyOf members -----------------------------------------------------------------------------


def _duration(value: object) -> int | str:
    """``anyOf``: integer nanoseconds in [0, 2**53-1], or text matching DURATION_PATTERN."""
    if isinstance(value, str) and _DURATION_TEXT.fullmatch(value):
        return value
    if _is_json_integer(value) and 0 <= value <= MAX_SAFE_INTEGER:
        return int(value)
    raise PydanticCustomError(
        "duration",
        "must be whole nanoseconds (0 to {maximum}) or a string matching {pattern}",
        {"maximum": MAX_SAFE_INTEGER, "pattern": DURATION_PATTERN},
    )


def _dimension(value: object) -> int | str:
    """``anyOf``: a tensor extent in [0, 2**53-1], or the name of an axis."""
    if isinstance(value, str) and _IDENTIFIER_TEXT.fullmatch(value):
        return value
    if _is_json_integer(value) and 0 <= value <= MAX_SAFE_INTEGER:
        return int(value)
    raise PydanticCustomError(
        "dimension",
        "must be an integer from 0 to {maximum} or an axis name matching {pattern}",
        {"maximum": MAX_SAFE_INTEGER, "pattern": IDENTIFIER_PATTERN},
    )


def _number_or_text500(value: object) -> float | str:
    """``anyOf``: a number, or a string of at most 500 characters."""
    if (isinstance(value, str) and len(value) <= 500) or _is_json_number(value):
        return value
    raise PydanticCustomError(
        "number_or_text", "must be a number or a string of at most 500 characters"
    )


Duration = Annotated[int | str, PlainValidator(_duration)]
"""A duration as authored; canonicalisation turns text like ``"0.008 ms"`` into ``8000``."""
Dimension = Annotated[int | str, PlainValidator(_dimension)]
NumberOrText500 = Annotated[float | str, PlainValidator(_number_or_text500)]


# --- prefixItems -------------------------------------------------------------------------------


def _duration_prefix(items: list[Any]) -> list[Any]:
    """``prefixItems: [Duration, Duration]`` with no ``items``/``minItems``/``maxItems``.

    So the array may be shorter than two, and any items after the second are unconstrained.
    """
    errors: list[InitErrorDetails] = []
    for index, item in enumerate(items[:2]):
        try:
            _duration(item)
        except PydanticCustomError as error:
            errors.append({"type": error, "loc": (index,), "input": item})
    if errors:
        raise ValidationError.from_exception_data("prefixItems", errors)
    return items


DurationPrefixPair = Annotated[list[Any], AfterValidator(_duration_prefix)]


# --- shared objects ----------------------------------------------------------------------------


class Author(StrictModel):
    name: Text200 | None = None
    github: Text100 | None = None


class SourceRef(StrictModel):
    url: Text2000


class Metadata(StrictModel):
    """``metadata``: identical in every kind and never part of a digest."""

    name: ObjectName
    title: Text200 | None = None
    description: Text2000 | None = None
    labels: dict[Identifier, Text200] | None = None
    authors: list[Author] | None = None
    source_refs: list[SourceRef] | None = None


class ArtifactRef(StrictModel):
    """A content-addressed blob: logs, raw samples, tensor data, reference code."""

    uri: Text2000
    digest: Sha256Digest


class Measurement(StrictModel):
    """One reported statistic (BenchmarkRun and ServingRun ``measurements`` items)."""

    metric: Identifier
    unit: Identifier
    statistic: Identifier
    value: Number
    sample_count: PositiveInteger | None = None


class Manifest(StrictModel):
    """``{apiVersion, kind, metadata, spec}``; each kind narrows ``kind`` and adds ``spec``."""

    api_version: ApiVersion
    kind: str
    metadata: Metadata


# --- benchmark_protocol ------------------------------------------------------------------------
class Harness(StrictModel):
    name: Text200
    version: Text100 | None = None
    repository: Text2000 | None = None
    commit: GitCommit | None = None


class MeasurementProcedure(StrictModel):
    """The schema's ``spec.measurement``."""

    timer: Identifier
    synchronization: Identifier | None = None
    compile_included: bool | None = None
    setup_included: bool | None = None
    warmup_iterations: NonNegativeInteger | None = None
    warmup_duration: Duration | None = None
    measured_iterations: PositiveInteger | None = None
    samples: PositiveInteger | None = None
    input_regeneration: Identifier | None = None
    outlier_policy: Text500 | None = None
    primary_statistic: Identifier


class ProtocolCorrectness(StrictModel):
    reference: Text500
    comparator: Identifier


class DevicePolicy(StrictModel):
    clocks_locked: bool | None = None
    power_limit_watts: PositiveNumber | None = None
    persistence_mode: bool | None = None


class Comparability(StrictModel):
    family: Identifier
    notes: Text1000 | None = None


class BenchmarkProtocolSpec(StrictModel):
    harness: Harness
    measurement: MeasurementProcedure
    correctness: ProtocolCorrectness | None = None
    device_policy: DevicePolicy | None = None
    comparability: Comparability | None = None


class BenchmarkProtocol(Manifest):
    kind: Literal["BenchmarkProtocol"]
    spec: BenchmarkProtocolSpec


# --- benchmark_run -----------------------------------------------------------------------------
RunStatus = Literal[
    "passed",
    "incorrect_shape",
    "incorrect_dtype",
    "incorrect_numerical",
    "compile_error",
    "runtime_error",
    "timeout",
    "resource_exceeded",
    "invalid_reference",
    "policy_violation",
    "suspected_reward_hack",
    "incomplete_evidence",
    "revoked",
]


class RunCorrectness(StrictModel):
    comparator: Identifier
    maximum_absolute_error: NonNegativeNumber | None = None
    maximum_relative_error: NonNegativeNumber | None = None
    matched_ratio: Fraction | None = None


class LatencyNs(StrictModel):
    """Latency statistics; each a duration (canonical form: integer nanoseconds)."""

    median: Duration | None = None
    mean: Duration | None = None
    p05: Duration | None = None
    p95: Duration | None = None
    minimum: Duration | None = None
    maximum: Duration | None = None
    mad: Duration | None = None
    confidence95: DurationPrefixPair | None = None


class Timing(StrictModel):
    primary_statistic: Identifier
    samples: PositiveInteger | None = None
    latency_ns: LatencyNs
    raw_samples: ArtifactRef | None = None


class RunSourceNative(StrictModel):
    """The result as the source published it."""

    source: Slug
    benchmark: Text200 | None = None
    external_id: Text500 | None = None
    metrics: dict[Identifier, Number] | None = None


class HarnessCheckout(StrictModel):
    repository: Text2000
    commit: GitCommit


class Evidence(StrictModel):
    logs: ArtifactRef | None = None
    raw_samples: ArtifactRef | None = None
    harness: HarnessCheckout | None = None


class BenchmarkRunSpec(StrictModel):
    implementation_digest: Sha256Digest
    workload_digest: Sha256Digest
    protocol_digest: Sha256Digest
    environment_digest: Sha256Digest
    status: RunStatus
    correctness: RunCorrectness | None = None
    timing: Timing | None = None
    measurements: list[Measurement] | None = None
    source_native: RunSourceNative | None = None
    evidence: Evidence | None = None
    observed_at: Timestamp


class BenchmarkRun(Manifest):
    kind: Literal["BenchmarkRun"]
    spec: BenchmarkRunSpec


# --- execution_environment ---------------------------------------------------------------------
class Hardware(StrictModel):
    vendor: Identifier
    product: Text200
    architecture: Identifier
    form_factor: Text100 | None = None
    memory_bytes: PositiveInteger | None = None
    count: PositiveInteger | None = None
    interconnect: Text200 | None = None


class Framework(StrictModel):
    name: Identifier
    version: Text100


class Software(StrictModel):
    operating_system: Text200 | None = None
    kernel: Text200 | None = None
    driver: Text100 | None = None
    cuda_toolkit: Text100 | None = None
    compiler: Text200 | None = None
    framework: Framework | None = None
    libraries: dict[Identifier, Text100] | None = None


class Settings(StrictModel):
    clocks_locked: bool | None = None
    power_limit_watts: PositiveNumber | None = None
    persistence_mode: bool | None = None
    ecc_enabled: bool | None = None
    environment_variables: dict[Text200, Text500] | None = None


class ExecutionEnvironmentSpec(StrictModel):
    hardware: Hardware
    software: Software
    settings: Settings | None = None
    image_digest: Sha256Digest | None = None


class ExecutionEnvironment(Manifest):
    kind: Literal["ExecutionEnvironment"]
    spec: ExecutionEnvironmentSpec


# --- implementation_revision -------------------------------------------------------------------
class ProjectRevision(StrictModel):
    repository: Text2000 | None = None
    commit: GitCommit | None = None
    version: Text100 | None = None
    tree_digest: Sha256Digest | None = None


class OperationRef(StrictModel):
    spec_digest: Sha256Digest


class CallableEntry(StrictModel):
    """The schema's ``spec.callable``."""

    language: Identifier
    path: Text500 | None = None
    symbol: Text200 | None = None
    interface: Identifier | None = None


class Support(StrictModel):
    """Set-like lists (canonicalisation sorts and de-duplicates them; docs/design.md §4)."""

    hardware_architectures: list[Identifier]
    products_tested: list[Text100] | None = None
    axes: list[Text200] | None = None
    dtypes: list[Identifier]
    layouts: list[Text50] | None = None


class SourceFile(StrictModel):
    content_digest: Sha256Digest
    file_name: Text200 | None = None
    size_bytes: PositiveInteger | None = None


class Install(StrictModel):
    kind: Literal["git", "pip", "package", "container", "source"]
    repository: Text2000 | None = None
    commit: GitCommit | None = None
    package: Text200 | None = None
    version: Text100 | None = None
    command: Text1000 | None = None


class BuildVariant(StrictModel):
    name: ObjectName
    install: Install
    requirements: dict[Identifier, Text200] | None = None


class LicenseEvidence(StrictModel):
    path: Text500
    digest: Sha256Digest | None = None


class Licensing(StrictModel):
    declared: Text200 | None = None
    concluded: Text200 | None = None
    evidence: LicenseEvidence | None = None


class ImplementationRevisionSpec(StrictModel):
    project_revision: ProjectRevision
    operation: OperationRef
    callable: CallableEntry
    support: Support
    source: SourceFile | None = None
    build_variants: list[BuildVariant] | None = None
    licensing: Licensing


class ImplementationRevision(Manifest):
    kind: Literal["ImplementationRevision"]
    spec: ImplementationRevisionSpec


# --- model_revision ----------------------------------------------------------------------------
class ModelRepository(StrictModel):
    host: Literal["huggingface", "github", "other"]
    id: Text200
    revision: Text100 | None = None


class Tokenizer(StrictModel):
    name: Text200 | None = None
    revision: Text100 | None = None
    digest: Sha256Digest | None = None


class ModelRevisionSpec(StrictModel):
    model: Text200
    repository: ModelRepository | None = None
    tokenizer: Tokenizer | None = None
    architecture: Text100 | None = None
    parameter_count: PositiveInteger | None = None
    context_length: PositiveInteger | None = None
    modality: Identifier | None = None
    license: Text200 | None = None


class ModelRevision(Manifest):
    kind: Literal["ModelRevision"]
    spec: ModelRevisionSpec


# --- operation_spec ----------------------------------------------------------------------------
AxisExpression = Annotated[str, StringConstraints(max_length=200, pattern=r"^[a-z0-9_+\-*%/() ]+$")]


class AxisDefinition(StrictModel):
    role: Literal["variable", "constant", "derived"]
    type: Literal["integer"]
    value: SafeInteger | None = None
    minimum: SafeInteger | None = None
    maximum: SafeInteger | None = None
    expression: AxisExpression | None = None


class TensorSignature(StrictModel):
    shape: Annotated[list[Dimension], MinLen(1)]
    dtype: Identifier
    layout: Literal["row_major", "col_major", "contiguous", "strided"] | None = None


class ScalarSignature(StrictModel):
    dtype: Identifier


class Parameter(StrictModel):
    """An input or output: a tensor, a scalar, or (as the schema allows) neither."""

    name: Identifier
    tensor: TensorSignature | None = None
    scalar: ScalarSignature | None = None


class Semantics(StrictModel):
    expression: Text2000 | None = None
    mutation: Literal["none", "in_place", "destination"]
    determinism: Literal["deterministic", "nondeterministic", "unspecified"]


class ReferenceImplementation(StrictModel):
    language: Identifier
    artifact: ArtifactRef | None = None


class OperationSpecSpec(StrictModel):
    family: Slug
    axes: dict[Identifier, AxisDefinition]
    inputs: Annotated[list[Parameter], MinLen(1)]
    outputs: Annotated[list[Parameter], MinLen(1)]
    semantics: Semantics
    reference: ReferenceImplementation | None = None


class OperationSpec(Manifest):
    kind: Literal["OperationSpec"]
    spec: OperationSpecSpec


# --- serving_configuration ---------------------------------------------------------------------
class Parallelism(StrictModel):
    tensor: PositiveInteger | None = None
    pipeline: PositiveInteger | None = None
    data: PositiveInteger | None = None
    expert: PositiveInteger | None = None
    context: PositiveInteger | None = None


class KvCache(StrictModel):
    dtype: Identifier | None = None
    capacity_tokens: PositiveInteger | None = None


class Limits(StrictModel):
    max_sequence_length: PositiveInteger | None = None
    max_batch_size: PositiveInteger | None = None
    max_num_tokens: PositiveInteger | None = None


class Speculative(StrictModel):
    method: Identifier
    draft_model: Text200 | None = None


class ServingConfigurationSpec(StrictModel):
    stack_digest: Sha256Digest
    dtype: Identifier | None = None
    quantization: Identifier | None = None
    parallelism: Parallelism | None = None
    attention_backend: Identifier | None = None
    kv_cache: KvCache | None = None
    limits: Limits | None = None
    speculative: Speculative | None = None
    options: dict[Identifier, Text500] | None = None


class ServingConfiguration(Manifest):
    kind: Literal["ServingConfiguration"]
    spec: ServingConfigurationSpec


# --- serving_run -------------------------------------------------------------------------------
class Topology(StrictModel):
    accelerator_vendor: Identifier | None = None
    accelerator_model: Text200
    accelerators_per_node: PositiveInteger
    node_count: PositiveInteger
    interconnect: Text200 | None = None


class ServingHarness(StrictModel):
    name: Identifier
    version: Text100


class ServingSourceNative(StrictModel):
    """The result as the source (e.g. MLPerf Inference) published it."""

    source: Slug
    benchmark: Text200
    scenario: Identifier
    division: Identifier
    category: Identifier
    external_id: Text500
    metrics: dict[Identifier, NumberOrText500] | None = None


class ServingRunSpec(StrictModel):
    model_digest: Sha256Digest
    configuration_digest: Sha256Digest
    workload_digest: Sha256Digest
    topology: Topology
    harness: ServingHarness
    placement: Identifier | None = None
    quality_policy: Identifier
    status: Literal["valid", "invalid", "incomplete_evidence"]
    measurements: Annotated[list[Measurement], Len(1, 64)]
    source_native: ServingSourceNative | None = None
    caveats: Annotated[list[Text500], MaxLen(16)] | None = None
    observed_at: Timestamp


class ServingRun(Manifest):
    kind: Literal["ServingRun"]
    spec: ServingRunSpec


# --- serving_stack_revision --------------------------------------------------------------------
class StackProject(StrictModel):
    name: Text200
    repository: Text2000 | None = None


class StackRevision(StrictModel):
    version: Text120 | None = None
    commit: GitCommit | None = None
    container_digest: Sha256Digest | None = None


class ServingStackRevisionSpec(StrictModel):
    project: StackProject
    revision: StackRevision
    backends: Annotated[list[Identifier], MaxLen(8)] | None = None
    api_protocol: Identifier | None = None
    license: Text200 | None = None


class ServingStackRevision(Manifest):
    kind: Literal["ServingStackRevision"]
    spec: ServingStackRevisionSpec


# --- serving_workload --------------------------------------------------------------------------
class Dataset(StrictModel):
    name: Text200
    digest: Sha256Digest | None = None


class TokenDistribution(StrictModel):
    distribution: Identifier
    mean: PositiveNumber | None = None
    maximum: PositiveInteger | None = None
    artifact_digest: Sha256Digest | None = None


class Tokens(StrictModel):
    prompt: TokenDistribution | None = None
    output: TokenDistribution | None = None


class SloTarget(StrictModel):
    metric: Identifier
    statistic: Identifier
    operator: Literal["<=", "<"]
    value: PositiveNumber
    unit: Identifier


class Sampling(StrictModel):
    temperature: Number | None = None
    seeded: bool | None = None


class ServingWorkloadSpec(StrictModel):
    dataset: Dataset | None = None
    tokens: Tokens | None = None
    streaming: bool
    load_generation: Literal["open_loop", "closed_loop", "offline"]
    arrival: Identifier | None = None
    request_rate_per_second: PositiveNumber | None = None
    slo: Annotated[list[SloTarget], MaxLen(8)] | None = None
    sampling: Sampling | None = None
    duration_seconds: PositiveInteger | None = None
    request_count: PositiveInteger | None = None


class ServingWorkload(Manifest):
    kind: Literal["ServingWorkload"]
    spec: ServingWorkloadSpec


# --- software_project --------------------------------------------------------------------------
class ProjectHost(StrictModel):
    kind: Literal["github", "huggingface", "gitlab", "other"]
    id: Text200


class PackageRef(StrictModel):
    ecosystem: Identifier
    name: Text200


class SoftwareProjectSpec(StrictModel):
    name: Text200
    kind: Literal["library", "individual", "vendor"] | None = None
    repository: Text2000 | None = None
    homepage: Text2000 | None = None
    host: ProjectHost | None = None
    packages: list[PackageRef] | None = None


class SoftwareProject(Manifest):
    kind: Literal["SoftwareProject"]
    spec: SoftwareProjectSpec


# --- workload_case -----------------------------------------------------------------------------
SpecialValuePolicy = Literal["reject", "exact_match", "ignore"]


class TensorData(StrictModel):
    generator: Identifier
    seed: NonNegativeInteger | None = None
    parameters: dict[Identifier, Number] | None = None
    artifact: ArtifactRef | None = None


class TensorInstance(StrictModel):
    shape: Annotated[list[NonNegativeInteger], MinLen(1)]
    dtype: Identifier
    strides: list[SafeInteger] | None = None
    alignment_bytes: PositiveInteger | None = None
    data: TensorData | None = None


class ScalarInstance(StrictModel):
    dtype: Identifier
    value: Number


class CaseCorrectness(StrictModel):
    comparator: Identifier
    max_absolute_error: NonNegativeNumber | None = None
    max_relative_error: NonNegativeNumber | None = None
    required_matched_ratio: Fraction | None = None
    nan_policy: SpecialValuePolicy | None = None
    infinity_policy: SpecialValuePolicy | None = None


class WorkloadCaseSpec(StrictModel):
    operation_spec_digest: Sha256Digest
    axes: AxisValues
    tensors: dict[Identifier, TensorInstance]
    scalars: dict[Identifier, ScalarInstance] | None = None
    correctness: CaseCorrectness


class WorkloadCase(Manifest):
    kind: Literal["WorkloadCase"]
    spec: WorkloadCaseSpec


# --- workload_suite ----------------------------------------------------------------------------
class SuiteCase(StrictModel):
    external_id: Text200
    axes: AxisValues


class SuiteCorrectness(StrictModel):
    comparator: Identifier
    description: Text500 | None = None


class Aggregation(StrictModel):
    metric: Identifier
    statistic: Identifier


class WorkloadSuiteSpec(StrictModel):
    operation_spec_digest: Sha256Digest
    cases: Annotated[list[SuiteCase], MinLen(1)]
    correctness: SuiteCorrectness
    aggregation: Aggregation


class WorkloadSuite(Manifest):
    kind: Literal["WorkloadSuite"]
    spec: WorkloadSuiteSpec


MODELS: dict[str, type[BaseModel]] = {
    name: cls
    for name, cls in dict(globals()).items()
    if isinstance(cls, type) and issubclass(cls, Manifest) and cls is not Manifest
}


def accepts(document: object) -> bool:
    """The pydantic verdict on a parsed manifest, with the registry's envelope checks."""
    if not isinstance(document, dict) or not isinstance(document.get("kind"), str):
        return False
    model = MODELS.get(document["kind"])
    if model is None or document.get("apiVersion") != "kernelindex.dev/v1alpha1":
        return False
    try:
        model.model_validate(document)
    except ValidationError:
        return False
    return True
