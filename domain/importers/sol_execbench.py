"""SOL-ExecBench benchmark folders → KernelIndex manifests (pure: bytes in, records out).

A folder holds ``definition.json`` (the operator contract), ``workload.jsonl`` (one concrete
binding of the variable axes per line), ``solution*.json`` (implementations) and optionally
``trace*.jsonl`` (one benchmark result per line). The format documents are SOL-ExecBench's
``docs/{definition,workload,solution,trace}.md``.

The definition, workload and hardware normalisation here is shared with the leaderboard
importer (:mod:`domain.importers.sol_leaderboard`) and follows KernelIndex's own SOL importer,
so that our digests equal the public catalog's for the same source data (verified against
every SOL-ExecBench row of the catalog export in the tests):

* ``Definition`` → ``OperationSpec``: axes ``var``/``const``/``expr`` → roles
  ``variable``/``constant``/``derived`` (axis names and expressions lower-cased); inputs and
  outputs become argument lists in definition order (names normalised to ``[a-z][a-z0-9_]*``;
  a ``null`` or empty shape is a scalar); dtypes normalised (``bfloat16`` → ``bf16`` ...);
  family = the kebab-cased ``op_type``, else the first tag that is not a subset marker
  (``L1``, ``L2``, ``Quant``, ``FlashInfer-Bench``) or ``model:`` provenance, else
  ``uncategorized``; ``reference: {language: python}`` when the definition carries a reference;
  semantics ``{mutation: none, determinism: unspecified}`` (SOL states neither).
* one workload entry → ``WorkloadCase``: the entry's axes, the input tensors' concrete shapes
  (constants bound from the definition, derived axes evaluated), tolerances when given.
* all entries → ``WorkloadSuite`` (cases = external id + axes; aggregation latency/mean).
  A case's external id is the entry's ``uuid``, else the first 12 hex digits of the sha256 of
  its axes as KernelIndex serialises them (JavaScript ``JSON.stringify`` with keys sorted by
  ``localeCompare``; emulated for ASCII names by :func:`_collation_key`).

Folder specifics (this module's own choices; nothing in the catalog to match):

* A solution becomes an ``ImplementationRevision`` whose ``spec.source`` names **the whole
  solution document in canonical JSON** (RFC 8785) as one artifact, ``fileName
  "solution.json"``: it holds every source file (``sources: [{path, content}]``) *and* the
  build spec (entry point, languages, compile options, dependencies), which is exactly what the
  SOL-ExecBench evaluator consumes, so a rerun writes it back and runs it. One canonical bundle
  also settles multi-file solutions (``cuda_cpp-rmsnorm`` has three files). Each source file is
  carried as an artifact of its own as well (name = its path), for people to read.
* Each trace line becomes one ``BenchmarkRun`` on one ``WorkloadCase`` (protocol "SOL-ExecBench
  trace harness", environment from the trace's ``evaluation.environment``). Status mapping:
  PASSED → passed, INCORRECT_SHAPE/_DTYPE/_NUMERICAL → incorrect_shape/_dtype/_numerical,
  RUNTIME_ERROR → runtime_error, COMPILE_ERROR → compile_error, TIMEOUT → timeout,
  REWARD_HACK → suspected_reward_hack, INVALID_REFERENCE → invalid_reference; anything else is
  rejected. Raw evidence: ``spec.evidence.logs`` names the evaluation log (text/plain artifact)
  when the trace has one, else the trace record itself (its canonical JSON, also the snapshot).
* A folder without ``trace*.jsonl`` yields **no record** (one :class:`Skipped` saying why): a
  record is a run, and a solution alone is not a result. Its implementations are available
  from :func:`map_sol_execbench_solutions` (which also takes a definition from elsewhere,
  for ``reward-hacks/``, which has solutions only). Problems in files a trace needs are
  reported in that trace's rejection.
"""

from __future__ import annotations

import copy
import hashlib
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Final

from domain import expressions
from domain.canonical import canonical_json
from domain.documents import parse_json
from domain.errors import DomainError
from domain.importers.records import Artifact, ImportRecord, Rejection, Skipped
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.manifest_set import check_manifest_set

__all__ = [
    "API_VERSION",
    "COMPARATOR",
    "SOURCE",
    "TRACE_STATUS",
    "Hardware",
    "JsonObject",
    "MappedDefinition",
    "MappedSolution",
    "SolFormatError",
    "case_from_entry",
    "evaluate_axis_expression",
    "implementation_from_solution",
    "js_round",
    "kebab",
    "map_definition",
    "map_dtype",
    "map_hardware",
    "map_language",
    "map_sol_execbench",
    "map_sol_execbench_solutions",
    "operation_from_definition",
    "suite_from_entries",
    "to_utc_instant",
    "trace_environment",
    "trace_protocol",
    "workload_entry_key",
]

API_VERSION: Final = "kernelindex.dev/v1alpha1"
SOURCE: Final = "sol-execbench"
COMPARATOR: Final = "sol_execbench_eval"
SOLUTION_FILE_NAME: Final = "solution.json"
MAX_SAFE_INTEGER: Final = 2**53 - 1

JsonObject = dict[str, Any]


class SolFormatError(DomainError):
    """A SOL-ExecBench document lacks a field, has a wrong type or an impossible value."""

    code = "malformed-source"


# --- small readers ------------------------------------------------------------------------------


def _object(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SolFormatError(f"{where} must be a JSON object, got {_type(value)}")
    return value


def _type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _string(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        missing = key not in obj or value is None
        raise SolFormatError(
            f"{where}: '{key}' is missing"
            if missing
            else f"{where}: '{key}' must be a non-empty string, got {_type(value)}"
        )
    return value


def _optional_string(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise SolFormatError(f"{where}: '{key}' must be a string, got {_type(value)}")
    return value


def _integer(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SolFormatError(f"{where} must be an integer, got {_type(value)}")
    if isinstance(value, float) and not value.is_integer():
        raise SolFormatError(f"{where} must be an integer, got {value!r}")
    whole = int(value)
    if abs(whole) > MAX_SAFE_INTEGER:
        raise SolFormatError(f"{where} is beyond ±(2^53−1)")
    return whole


def _number(value: object, where: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SolFormatError(f"{where} must be a number, got {_type(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise SolFormatError(f"{where} must be finite")
    return value


def _optional_number(obj: Mapping[str, Any], key: str, where: str) -> int | float | None:
    value = obj.get(key)
    return None if value is None else _number(value, f"{where}: '{key}'")


def _text(value: str, limit: int) -> str:
    """Metadata text cut to a schema length (metadata never enters a digest)."""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def kebab(value: str) -> str:
    """Lower-case, runs of other characters → '-', trimmed, at most 100 characters."""
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")[:100]


_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?"
    r"(Z|z|[+-]\d{2}:\d{2})?"
)


def to_utc_instant(value: object, where: str) -> str:
    """A source timestamp as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC, milliseconds).

    A timestamp without a zone is UTC by convention (the SOL API writes naive UTC times);
    digits below the millisecond are truncated, as a JavaScript ``Date`` does (KernelIndex's
    conversion, so that ``observedAt`` and the run digest agree with the catalog).
    """
    if not isinstance(value, str):
        raise SolFormatError(f"{where} must be a timestamp string, got {_type(value)}")
    match = _TIMESTAMP.fullmatch(value.strip())
    if match is None:
        raise SolFormatError(f"{where}: {value!r} is not an ISO 8601 date-time")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    millis = int((fraction or "0")[:3].ljust(3, "0"))
    if zone is None or zone in ("Z", "z"):
        tz = UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second or 0),
            millis * 1000,
            tzinfo=tz,
        ).astimezone(UTC)
    except (ValueError, OverflowError):
        raise SolFormatError(f"{where}: {value!r} is not a valid date-time") from None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def js_round(value: float) -> int:
    """JavaScript's ``Math.round`` (halves go up), as KernelIndex rounds ms → ns."""
    whole = math.floor(value)
    return int(whole) + (1 if value - whole >= 0.5 else 0)


# --- vocabularies -------------------------------------------------------------------------------

_DTYPES: Final[Mapping[str, str]] = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "float64": "fp64",
    "double": "fp64",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "nvfp4": "nvfp4",
    "float4_e2m1": "fp4_e2m1",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "bool": "bool",
}

_LANGUAGES: Final[Mapping[str, str]] = {
    "cuda_cpp": "cuda",
    "cute_dsl": "cute_dsl",
    "cutile": "cutile",
    "cutlass": "cutlass",
    "cudnn": "cudnn",
    "triton": "triton",
    "pytorch": "pytorch",
}
_CPP_LANGUAGES: Final = frozenset({"cuda_cpp", "cutlass", "cudnn", "cublas"})


def _identifier_like(value: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", value.lower())


def map_dtype(dtype: str) -> str:
    """SOL dtype → KernelIndex dtype (``bfloat16`` → ``bf16``); others pass, normalised."""
    return _DTYPES.get(dtype) or _identifier_like(dtype)


def map_language(language: str) -> str:
    return _LANGUAGES.get(language) or _identifier_like(language)


@dataclass(frozen=True)
class Hardware:
    vendor: str
    product: str
    architecture: str

    def as_json(self) -> JsonObject:
        return {"vendor": self.vendor, "product": self.product, "architecture": self.architecture}


_HARDWARE: Final[Mapping[str, Hardware]] = {
    "B200": Hardware("nvidia", "NVIDIA B200", "sm_100"),
    "NVIDIA_B200": Hardware("nvidia", "NVIDIA B200", "sm_100"),
    "GB200": Hardware("nvidia", "NVIDIA GB200", "sm_100"),
    "H200": Hardware("nvidia", "NVIDIA H200", "sm_90"),
    "H100": Hardware("nvidia", "NVIDIA H100", "sm_90"),
    "NVIDIA_H100": Hardware("nvidia", "NVIDIA H100", "sm_90"),
    "A100": Hardware("nvidia", "NVIDIA A100", "sm_80"),
}


def map_hardware(name: str) -> Hardware:
    """A SOL GPU name → vendor, product and architecture (``unknown`` when not in the table)."""
    return _HARDWARE.get(name) or Hardware("nvidia", name.replace("_", " "), "unknown")


# --- derived axes -------------------------------------------------------------------------------


def evaluate_axis_expression(expression: str, bindings: Mapping[str, int]) -> int:
    """The integer value of a derived axis (names are looked up lower-cased), in the one
    expression language (``domain.expressions``, extended: ``**`` and exact ``/``, as SOL's
    docs allow), bounded by what a manifest's JSON number holds exactly."""
    try:
        return expressions.evaluate(
            expression.lower(), bindings, extended=True, bound=expressions.MAX_SAFE_INTEGER
        )
    except expressions.ExpressionError as exc:
        raise SolFormatError(exc.message) from None


# --- identity of a workload entry -----------------------------------------------------------------

# ICU root collation order of ASCII punctuation and symbols (all before digits and letters).
_PUNCTUATION: Final = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"


def _collation_key(text: str) -> tuple[list[tuple[int, int]], list[int], str]:
    """Sort key emulating JavaScript ``localeCompare`` (ICU root collation) for ASCII names.

    Primary: punctuation < digits < letters, letters compared without case; then lower case
    before upper case; the raw string breaks any remaining tie. Non-ASCII characters sort
    after all of these by code point (an approximation; SOL axis names are ASCII).
    """
    primary: list[tuple[int, int]] = []
    tertiary: list[int] = []
    for char in text:
        if char.isascii() and char.isalpha():
            primary.append((3, ord(char.lower())))
            tertiary.append(1 if char.isupper() else 0)
        elif char.isascii() and char.isdigit():
            primary.append((2, ord(char)))
            tertiary.append(0)
        elif char in _PUNCTUATION:
            primary.append((1, _PUNCTUATION.index(char)))
            tertiary.append(0)
        else:
            primary.append((4, ord(char)))
            tertiary.append(0)
    return primary, tertiary, text


def _entry_axes(entry: Mapping[str, Any], where: str) -> dict[str, int]:
    axes = _object(entry.get("axes"), f"{where}: 'axes'")
    return {str(name): _integer(value, f"{where}: axis '{name}'") for name, value in axes.items()}


def workload_entry_key(entry: Mapping[str, Any], where: str = "workload") -> str:
    """The entry's ``uuid``; without one, 12 hex digits of the sha256 of its sorted axes."""
    uuid = entry.get("uuid")
    if isinstance(uuid, str) and uuid:
        return uuid
    axes = _entry_axes(entry, where)
    ordered = sorted(axes.items(), key=lambda item: _collation_key(item[0]))
    text = b"{" + b",".join(canonical_json(k) + b":" + canonical_json(v) for k, v in ordered)
    return hashlib.sha256(text + b"}").hexdigest()[:12]


# --- definition → operation, workloads → cases and suite -----------------------------------------

_SUBSET_TAGS: Final = frozenset({"L1", "L2", "Quant", "FlashInfer-Bench"})


def _axis_key(name: str) -> str:
    return name.lower()


def _argument_key(name: str) -> str:
    lowered = _identifier_like(name)
    return lowered if re.match(r"[a-z]", lowered) else f"x_{lowered}"


def _dimension(value: object, where: str) -> int | str:
    if isinstance(value, str):
        if re.fullmatch(r"\d+", value):
            return _integer(int(value) if len(value) <= 17 else 2**63, where)
        return _axis_key(value)
    return _integer(value, where)


@dataclass(frozen=True)
class _Argument:
    name: str
    shape: tuple[int | str, ...] | None  # None: a scalar
    dtype: str


def _arguments(definition: Mapping[str, Any], key: str) -> list[_Argument]:
    where = f"definition '{key}'"
    record = _object(definition.get(key), where)
    arguments = []
    for name, raw in record.items():
        tensor = _object(raw, f"{where}: '{name}'")
        dtype = _string(tensor, "dtype", f"{where}: '{name}'")
        shape = tensor.get("shape")
        if shape is not None and not isinstance(shape, list):
            raise SolFormatError(f"{where}: '{name}' shape must be an array or null")
        dims = (
            None
            if not shape
            else tuple(_dimension(d, f"{where}: '{name}' shape[{i}]") for i, d in enumerate(shape))
        )
        arguments.append(_Argument(str(name), dims, dtype))
    return arguments


def _argument_spec(argument: _Argument) -> JsonObject:
    if argument.shape is None:
        return {
            "name": _argument_key(argument.name),
            "scalar": {"dtype": map_dtype(argument.dtype)},
        }
    return {
        "name": _argument_key(argument.name),
        "tensor": {"shape": list(argument.shape), "dtype": map_dtype(argument.dtype)},
    }


def _family(definition: Mapping[str, Any]) -> str:
    op_type = definition.get("op_type")
    if isinstance(op_type, str) and op_type:
        return kebab(op_type)
    tags = definition.get("tags")
    for tag in tags if isinstance(tags, list) else []:
        if isinstance(tag, str) and tag not in _SUBSET_TAGS and not tag.startswith("model:"):
            return kebab(tag)
    return "uncategorized"


def _axes_spec(definition: Mapping[str, Any]) -> JsonObject:
    axes = _object(definition.get("axes"), "definition 'axes'")
    result: JsonObject = {}
    for name, raw in axes.items():
        where = f"definition axis '{name}'"
        axis = _object(raw, where)
        kind = axis.get("type")
        if kind == "const":
            value = _integer(axis.get("value"), f"{where}: 'value'")
            result[_axis_key(name)] = {"role": "constant", "type": "integer", "value": value}
        elif kind == "var":
            result[_axis_key(name)] = {"role": "variable", "type": "integer"}
        elif kind == "expr":
            expression = _string(axis, "expression", where).lower()
            result[_axis_key(name)] = {
                "role": "derived",
                "type": "integer",
                "expression": expression,
            }
        else:
            raise SolFormatError(f"{where}: type must be const, var or expr, got {kind!r}")
    return result


def operation_from_definition(
    definition: Mapping[str, Any], *, source_url: str | None = None
) -> JsonObject:
    """A SOL Definition (or leaderboard kernel) → ``OperationSpec`` manifest (unvalidated)."""
    name = _string(definition, "name", "definition")
    metadata: JsonObject = {"name": kebab(name) or "operation", "title": _text(name, 200)}
    description = _optional_string(definition, "description", "definition")
    if description:
        metadata["description"] = _text(description, 2000)
    if source_url is not None:
        metadata["sourceRefs"] = [{"url": source_url}]
    spec: JsonObject = {
        "family": _family(definition),
        "axes": _axes_spec(definition),
        "inputs": [_argument_spec(a) for a in _arguments(definition, "inputs")],
        "outputs": [_argument_spec(a) for a in _arguments(definition, "outputs")],
        "semantics": {"mutation": "none", "determinism": "unspecified"},
    }
    if definition.get("reference"):
        spec["reference"] = {"language": "python"}
    return {"apiVersion": API_VERSION, "kind": "OperationSpec", "metadata": metadata, "spec": spec}


def _bindings(
    definition: Mapping[str, Any], entry_axes: Mapping[str, int], where: str
) -> dict[str, int]:
    """Every axis value of one workload: the entry's, the constants, the derived ones."""
    bindings = {_axis_key(k): v for k, v in entry_axes.items()}
    axes = _object(definition.get("axes"), "definition 'axes'")
    derived: dict[str, str] = {}
    for name, raw in axes.items():
        axis = _object(raw, f"definition axis '{name}'")
        key = _axis_key(name)
        if axis.get("type") == "const":
            value = _integer(axis.get("value"), f"definition axis '{name}': 'value'")
            if key in bindings and bindings[key] != value:
                raise SolFormatError(
                    f"{where}: binds constant axis '{name}' to {bindings[key]}, "
                    f"but the definition fixes it at {value}"
                )
            bindings[key] = value
        elif axis.get("type") == "expr":
            derived[key] = _string(axis, "expression", f"definition axis '{name}'")
    pending = dict(derived)
    while pending:  # derived axes may refer to each other, in any order
        progress = False
        for key, expression in list(pending.items()):
            try:
                value = evaluate_axis_expression(expression, bindings)
            except SolFormatError:
                continue
            del pending[key]
            progress = True
            if key in bindings and bindings[key] != value:
                raise SolFormatError(
                    f"{where}: axis '{key}' is {bindings[key]}, but its expression "
                    f"{expression!r} gives {value}"
                )
            bindings[key] = value
        if not progress:
            key, expression = next(iter(pending.items()))
            try:
                evaluate_axis_expression(expression, bindings)
            except SolFormatError as exc:
                raise SolFormatError(f"{where}: derived axis '{key}': {exc.message}") from None
            raise SolFormatError(f"{where}: derived axis '{key}' cannot be evaluated")
    return bindings


def _tolerance(entry: Mapping[str, Any], where: str) -> JsonObject:
    correctness: JsonObject = {"comparator": COMPARATOR}
    raw = entry.get("tolerance")
    if raw is None:
        return correctness
    tolerance = _object(raw, f"{where}: 'tolerance'")
    for source_key, target_key in (
        ("max_atol", "maxAbsoluteError"),
        ("max_rtol", "maxRelativeError"),
        ("required_matched_ratio", "requiredMatchedRatio"),
    ):
        value = _optional_number(tolerance, source_key, f"{where}: tolerance")
        if value is not None:
            correctness[target_key] = value
    return correctness


def case_from_entry(
    definition: Mapping[str, Any], operation_digest: str, entry: Mapping[str, Any]
) -> JsonObject:
    """One workload entry → ``WorkloadCase`` manifest (unvalidated)."""
    name = _string(definition, "name", "definition")
    key = workload_entry_key(entry)
    where = f"workload {key}"
    entry_axes = _entry_axes(entry, where)
    bindings = _bindings(definition, entry_axes, where)
    raw_inputs = entry.get("inputs")
    descriptors = _object(raw_inputs, f"{where}: 'inputs'") if raw_inputs is not None else {}
    tensors: JsonObject = {}
    scalars: JsonObject = {}
    for argument in _arguments(definition, "inputs"):
        dtype = map_dtype(argument.dtype)
        raw = descriptors.get(argument.name)
        descriptor = _object(raw, f"{where}: input '{argument.name}'") if raw is not None else None
        kind = descriptor.get("type") if descriptor is not None else None
        if descriptor is not None and kind == "scalar":
            value = descriptor.get("value")
            if isinstance(value, int | float) and not isinstance(value, bool):
                scalars[_argument_key(argument.name)] = {"dtype": dtype, "value": value}
                continue
        if argument.shape is None:
            continue
        shape = []
        for dim in argument.shape:
            if isinstance(dim, int):
                shape.append(dim)
            elif dim in bindings:
                shape.append(bindings[dim])
            else:
                raise SolFormatError(f"{where}: input '{argument.name}' uses unbound axis '{dim}'")
        tensor: JsonObject = {"shape": shape, "dtype": dtype}
        if descriptor is not None:
            generator = kind if kind in ("safetensors", "custom") else "random"
            tensor["data"] = {"generator": generator}
        tensors[_argument_key(argument.name)] = tensor
    title = f"{name} · " + ", ".join(f"{k}={v}" for k, v in entry_axes.items())
    spec: JsonObject = {
        "operationSpecDigest": operation_digest,
        "axes": {_axis_key(k): v for k, v in entry_axes.items()},
        "tensors": tensors,
        "correctness": _tolerance(entry, where),
    }
    if scalars:
        spec["scalars"] = scalars
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadCase",
        "metadata": {
            "name": f"{kebab(name) or 'workload'}-{kebab(key[:8]) or 'case'}",
            "title": _text(title, 200),
        },
        "spec": spec,
    }


def suite_from_entries(
    definition: Mapping[str, Any], operation_digest: str, entries: Sequence[Mapping[str, Any]]
) -> JsonObject:
    """All workload entries of a definition → ``WorkloadSuite`` (aggregation latency/mean)."""
    name = _string(definition, "name", "definition")
    if not entries:
        raise SolFormatError(f"definition '{name}' has no workloads, so it has no suite")
    cases = []
    for index, entry in enumerate(entries):
        where = f"workload #{index + 1}"
        cases.append(
            {
                "externalId": workload_entry_key(entry, where),
                "axes": {_axis_key(k): v for k, v in _entry_axes(entry, where).items()},
            }
        )
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadSuite",
        "metadata": {
            "name": f"{kebab(name) or 'workload'}-suite",
            "title": _text(f"SOL workload suite: {name}", 200),
        },
        "spec": {
            "operationSpecDigest": operation_digest,
            "cases": cases,
            "correctness": {
                "comparator": COMPARATOR,
                "description": "Correctness must pass on every case in the SOL evaluation stack.",
            },
            "aggregation": {"metric": "latency", "statistic": "mean"},
        },
    }


@dataclass(frozen=True)
class MappedDefinition:
    """A definition's operation, its workload cases and (when it has workloads) its suite."""

    name: str
    operation: JsonObject
    operation_digest: str
    cases: tuple[JsonObject, ...]
    case_digests: Mapping[str, str]  # workload entry key → case digest
    suite: JsonObject | None
    suite_digest: str | None
    problems: tuple[str, ...] = field(default=())  # entries that could not become cases


def map_definition(
    definition: Mapping[str, Any],
    entries: Sequence[Mapping[str, Any]],
    *,
    source_url: str | None = None,
    with_suite: bool = True,
) -> MappedDefinition:
    """Operation, cases and suite of one definition; every manifest validated and digested.

    Raises a :class:`DomainError` when the operation (or, with ``with_suite``, the suite) cannot
    be built; a single entry that cannot become a case is listed in ``problems`` instead.
    """
    name = _string(definition, "name", "definition")
    operation = operation_from_definition(definition, source_url=source_url)
    operation_digest = manifest_digest(operation)
    cases: list[JsonObject] = []
    case_digests: dict[str, str] = {}
    problems: list[str] = []
    for index, raw in enumerate(entries):
        try:
            entry = _object(raw, f"workload #{index + 1}")
            case = case_from_entry(definition, operation_digest, entry)
            digest = manifest_digest(case)
        except DomainError as exc:
            problems.append(f"workload #{index + 1}: {exc.message}")
            continue
        cases.append(case)
        case_digests[workload_entry_key(entry)] = digest
    suite = suite_digest = None
    if with_suite:
        suite = suite_from_entries(definition, operation_digest, entries)
        suite_digest = manifest_digest(suite)
    return MappedDefinition(
        name=name,
        operation=operation,
        operation_digest=operation_digest,
        cases=tuple(cases),
        case_digests=case_digests,
        suite=suite,
        suite_digest=suite_digest,
        problems=tuple(problems),
    )


# --- solutions → implementations ------------------------------------------------------------------

_MEDIA_TYPES: Final[Mapping[str, str]] = {
    ".py": "text/x-python",
    ".cu": "text/x-cuda",
    ".cuh": "text/x-cuda",
    ".cpp": "text/x-c++src",
    ".cc": "text/x-c++src",
    ".cxx": "text/x-c++src",
    ".h": "text/x-c",
    ".hpp": "text/x-c++hdr",
    ".c": "text/x-c",
}


def _media_type(path: str) -> str:
    suffix = path[path.rfind(".") :].lower() if "." in path else ""
    return _MEDIA_TYPES.get(suffix, "text/plain")


def _sources(solution: Mapping[str, Any], where: str) -> list[tuple[str, str]]:
    raw = solution.get("sources")
    if not isinstance(raw, list) or not raw:
        raise SolFormatError(f"{where}: 'sources' must be a non-empty array")
    files: list[tuple[str, str]] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        source = _object(item, f"{where}: sources[{index}]")
        path = _string(source, "path", f"{where}: sources[{index}]")
        content = source.get("content")
        if not isinstance(content, str):
            raise SolFormatError(f"{where}: sources[{index}] 'content' must be a string")
        parts = path.replace("\\", "/").split("/")
        if path.startswith("/") or ".." in parts or "" in parts:
            raise SolFormatError(f"{where}: source path {path!r} must be relative, without '..'")
        if path in seen:
            raise SolFormatError(f"{where}: source path {path!r} appears twice")
        seen.add(path)
        files.append((path, content))
    return files


@dataclass(frozen=True)
class MappedSolution:
    """A solution's implementation manifest and the artifacts that pin its source."""

    name: str
    implementation: JsonObject
    implementation_digest: str
    bundle: Artifact  # canonical JSON of the whole solution; spec.source.contentDigest names it
    files: tuple[Artifact, ...]  # each source file on its own, for reading

    @property
    def artifacts(self) -> tuple[Artifact, ...]:
        return (self.bundle, *self.files)


def implementation_from_solution(
    solution: Mapping[str, Any], definition: Mapping[str, Any], operation_digest: str
) -> MappedSolution:
    """A SOL Solution → ``ImplementationRevision`` with its source pinned by digest."""
    name = _string(solution, "name", "solution")
    where = f"solution '{name}'"
    definition_name = _string(definition, "name", "definition")
    solves = _string(solution, "definition", where)
    if solves != definition_name:
        raise SolFormatError(f"{where} solves '{solves}', not this folder's '{definition_name}'")
    build = _object(solution.get("spec"), f"{where}: 'spec'")
    languages = build.get("languages")
    if isinstance(languages, list) and languages and isinstance(languages[0], str):
        language = languages[0]
    else:  # older solutions state one "language"
        language = _string(build, "language", f"{where}: spec")
    entry_point = _string(build, "entry_point", f"{where}: spec")
    path, _, symbol = entry_point.partition("::")
    files = _sources(solution, where)
    if path not in {p for p, _ in files}:
        raise SolFormatError(f"{where}: entry point file {path!r} is not among its sources")
    binding = build.get("binding")
    callable_: JsonObject = {"language": map_language(language), "path": path}
    if symbol:
        callable_["symbol"] = symbol
    if binding == "torch" or (binding is None and language in _CPP_LANGUAGES):
        callable_["interface"] = "pytorch"
    targets = build.get("target_hardware")
    products = [
        map_hardware(t)
        for t in (targets if isinstance(targets, list) else [])
        if isinstance(t, str) and t.upper() != "LOCAL"
    ]
    dtypes = sorted({map_dtype(a.dtype) for a in _arguments(definition, "inputs")})
    bundle_bytes = canonical_json(solution)
    bundle = Artifact(
        bundle_bytes, "application/json", f"{kebab(name) or 'solution'}.solution.json"
    )
    metadata: JsonObject = {"name": kebab(name) or "solution", "title": _text(name, 200)}
    description = _optional_string(solution, "description", where)
    if description:
        metadata["description"] = _text(description, 2000)
    author = _optional_string(solution, "author", where)
    if author:
        metadata["authors"] = [{"name": _text(author, 200)}]
    manifest: JsonObject = {
        "apiVersion": API_VERSION,
        "kind": "ImplementationRevision",
        "metadata": metadata,
        "spec": {
            "projectRevision": {},
            "operation": {"specDigest": operation_digest},
            "callable": callable_,
            "support": {
                "hardwareArchitectures": sorted({p.architecture for p in products}) or ["unknown"],
                "productsTested": sorted({p.product for p in products}),
                "dtypes": dtypes,
            },
            "source": {
                "contentDigest": bundle.digest,
                "fileName": SOLUTION_FILE_NAME,
                "sizeBytes": len(bundle_bytes),
            },
            "licensing": {},
        },
    }
    return MappedSolution(
        name=name,
        implementation=manifest,
        implementation_digest=manifest_digest(manifest),
        bundle=bundle,
        files=tuple(Artifact(c.encode("utf-8"), _media_type(p), p) for p, c in files),
    )


# --- traces → runs ------------------------------------------------------------------------------

TRACE_STATUS: Final[Mapping[str, str]] = {
    "PASSED": "passed",
    "INCORRECT_SHAPE": "incorrect_shape",
    "INCORRECT_NUMERICAL": "incorrect_numerical",
    "INCORRECT_DTYPE": "incorrect_dtype",
    "RUNTIME_ERROR": "runtime_error",
    "COMPILE_ERROR": "compile_error",
    "TIMEOUT": "timeout",
    "REWARD_HACK": "suspected_reward_hack",
    "INVALID_REFERENCE": "invalid_reference",
}


def trace_protocol() -> JsonObject:
    """The protocol of runs measured by the SOL-ExecBench harness itself (traces)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkProtocol",
        "metadata": {"name": "sol-execbench-trace", "title": "SOL-ExecBench trace harness"},
        "spec": {
            "harness": {
                "name": "sol-execbench",
                "repository": "https://github.com/nvidia/sol-execbench",
            },
            "measurement": {"timer": "harness_reported", "primaryStatistic": "mean"},
            "correctness": {
                "reference": "definition reference implementation",
                "comparator": COMPARATOR,
            },
            "comparability": {"family": "sol_execbench_trace"},
        },
    }


def trace_environment(environment: Mapping[str, Any]) -> JsonObject:
    """A trace's ``evaluation.environment`` → ``ExecutionEnvironment``."""
    where = "trace evaluation.environment"
    hardware_name = _string(environment, "hardware", where)
    libs = _object(environment.get("libs", {}), f"{where}: 'libs'")
    versions: dict[str, str] = {}
    for name, version in libs.items():
        if not isinstance(version, str):
            raise SolFormatError(f"{where}: libs '{name}' must be a version string")
        versions[str(name)] = version
    hardware = map_hardware(hardware_name)
    software: JsonObject = {}
    if "cuda" in versions:
        software["cudaToolkit"] = versions["cuda"]
    if versions.get("torch"):
        software["framework"] = {"name": "pytorch", "version": versions["torch"]}
    libraries = {map_language(k): v for k, v in versions.items() if k not in ("cuda", "torch")}
    if libraries:
        software["libraries"] = libraries
    name = kebab("-".join(["sol-trace", hardware_name, *versions.values()]))
    return {
        "apiVersion": API_VERSION,
        "kind": "ExecutionEnvironment",
        "metadata": {
            "name": name,
            "title": _text(f"{hardware.product} (trace-reported software)", 200),
        },
        "spec": {"hardware": hardware.as_json(), "software": software},
    }


@dataclass
class _Folder:
    """What a benchmark folder provides to its traces, with the reasons for what it lacks."""

    definition: Mapping[str, Any] | None = None
    definition_artifact: Artifact | None = None
    definition_problem: str | None = None
    mapped: MappedDefinition | None = None
    entries: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    solutions: dict[str, MappedSolution] = field(default_factory=dict)
    solution_problems: list[str] = field(default_factory=list)


def _parse_object(data: bytes, where: str) -> Mapping[str, Any]:
    return _object(parse_json(data), where)


def _jsonl(data: bytes) -> Iterator[tuple[int, Mapping[str, Any] | DomainError]]:
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, _parse_object(line, "the line")
        except DomainError as exc:
            yield number, exc


def _read_folder(files: Mapping[str, bytes], definition: bytes | None = None) -> _Folder:
    folder = _Folder()
    raw_definition = definition if definition is not None else files.get("definition.json")
    if raw_definition is None:
        folder.definition_problem = "the folder has no definition.json"
    else:
        try:
            folder.definition = _parse_object(raw_definition, "definition.json")
            folder.definition_artifact = Artifact(
                canonical_json(folder.definition), "application/json", "definition.json"
            )
            folder.mapped = map_definition(folder.definition, [], with_suite=False)
        except DomainError as exc:
            folder.definition = None
            folder.definition_problem = f"definition.json: {exc.message}"
    if "workload.jsonl" in files:
        for _, entry in _jsonl(files["workload.jsonl"]):
            if isinstance(entry, Mapping):
                try:
                    folder.entries.setdefault(workload_entry_key(entry), entry)
                except DomainError:
                    continue  # an unusable line; a trace carries its own workload anyway
    for file_name in sorted(n for n in files if re.fullmatch(r"solution.*\.json", n)):
        if folder.definition is None or folder.mapped is None:
            break
        try:
            solution = _parse_object(files[file_name], file_name)
            mapped = implementation_from_solution(
                solution, folder.definition, folder.mapped.operation_digest
            )
        except DomainError as exc:
            folder.solution_problems.append(f"{file_name}: {exc.message}")
            continue
        if mapped.name in folder.solutions:
            folder.solution_problems.append(f"{file_name}: solution '{mapped.name}' is repeated")
            continue
        folder.solutions[mapped.name] = mapped
    return folder


def map_sol_execbench_solutions(
    files: Mapping[str, bytes], definition: bytes | None = None
) -> Iterator[MappedSolution | Rejection]:
    """Every ``solution*.json`` of a folder as an implementation, or a rejection.

    ``definition`` (the bytes of a ``definition.json``) stands in for the folder's own, for a
    folder of solutions only such as ``reward-hacks/``.
    """
    folder = _read_folder(files, definition)
    if folder.definition is None:
        if any(re.fullmatch(r"solution.*\.json", n) for n in files):
            yield Rejection(None, f"solutions cannot be mapped: {folder.definition_problem}")
        return
    for problem in folder.solution_problems:
        yield Rejection(None, problem)
    yield from (folder.solutions[name] for name in sorted(folder.solutions))


def _trace_record(trace: Mapping[str, Any], folder: _Folder) -> ImportRecord:
    if folder.definition is None or folder.mapped is None or folder.definition_artifact is None:
        raise SolFormatError(f"trace cannot be mapped: {folder.definition_problem}")
    definition_name = _string(trace, "definition", "trace")
    if definition_name != folder.mapped.name:
        raise SolFormatError(
            f"trace is for definition '{definition_name}', not this folder's '{folder.mapped.name}'"
        )
    solution_name = _string(trace, "solution", "trace")
    solution = folder.solutions.get(solution_name)
    if solution is None:
        unreadable = "; ".join(folder.solution_problems)
        raise SolFormatError(
            f"trace names solution '{solution_name}', which this folder does not provide"
            + (f" (unreadable: {unreadable})" if unreadable else "")
        )
    workload = _object(trace.get("workload"), "trace 'workload'")
    key = workload_entry_key(workload, "trace workload")
    entry = folder.entries.get(key, workload)
    case = case_from_entry(folder.definition, folder.mapped.operation_digest, entry)
    evaluation = _object(trace.get("evaluation"), "trace 'evaluation'")
    raw_status = _string(evaluation, "status", "trace evaluation")
    status = TRACE_STATUS.get(raw_status)
    if status is None:
        raise SolFormatError(f"trace evaluation: unknown status {raw_status!r}")
    environment_source = _object(evaluation.get("environment"), "trace evaluation 'environment'")
    environment = trace_environment(environment_source)
    hardware_name = _string(environment_source, "hardware", "trace evaluation.environment")
    observed_at = to_utc_instant(evaluation.get("timestamp"), "trace evaluation 'timestamp'")
    protocol = trace_protocol()
    external_id = f"trace/{solution_name}/{key}/{hardware_name}"

    spec: JsonObject = {
        "implementationDigest": solution.implementation_digest,
        "workloadDigest": manifest_digest(case),
        "protocolDigest": manifest_digest(protocol),
        "environmentDigest": manifest_digest(environment),
        "status": status,
    }
    raw_correctness = evaluation.get("correctness")
    if raw_correctness is not None:
        correctness = _object(raw_correctness, "trace evaluation 'correctness'")
        block: JsonObject = {"comparator": COMPARATOR}
        for source_key, target_key in (
            ("max_absolute_error", "maximumAbsoluteError"),
            ("max_relative_error", "maximumRelativeError"),
        ):
            value = _optional_number(correctness, source_key, "trace evaluation.correctness")
            if value is not None:
                if value < 0:
                    raise SolFormatError(f"trace evaluation.correctness: '{source_key}' < 0")
                block[target_key] = value
        spec["correctness"] = block
    raw_performance = evaluation.get("performance")
    metrics: JsonObject = {}
    if raw_performance is not None:
        performance = _object(raw_performance, "trace evaluation 'performance'")
        latency = _number(performance.get("latency_ms"), "trace performance 'latency_ms'")
        if latency <= 0:
            raise SolFormatError(f"trace performance: latency_ms must be positive, got {latency}")
        spec["timing"] = {
            "primaryStatistic": "mean",
            "latencyNs": {"mean": js_round(latency * 1e6)},
        }
        metrics["latency_ms"] = latency
        for extra in ("reference_latency_ms", "speedup_factor"):
            value = _optional_number(performance, extra, "trace performance")
            if value is not None:
                metrics[extra] = value
    elif status == "passed":
        raise SolFormatError("trace evaluation: a PASSED trace must report its performance")
    native: JsonObject = {"source": SOURCE, "benchmark": definition_name, "externalId": external_id}
    if metrics:
        native["metrics"] = metrics
    spec["sourceNative"] = native

    snapshot = Artifact(canonical_json(trace), "application/json", "trace.json")
    log = evaluation.get("log")
    if log is not None and not isinstance(log, str):
        raise SolFormatError("trace evaluation: 'log' must be a string")
    evidence = Artifact(log.encode("utf-8"), "text/plain", "evaluation.log") if log else snapshot
    spec["evidence"] = {
        "logs": {"uri": f"kernelindex:artifact/{evidence.digest}", "digest": evidence.digest}
    }
    spec["observedAt"] = observed_at
    run: JsonObject = {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkRun",
        "metadata": {
            "name": kebab(f"sol-trace-{solution_name}-{key[:8]}-{hardware_name}") or "sol-trace",
            "title": _text(f"{solution_name} · {definition_name} · {hardware_name}", 200),
        },
        "spec": spec,
    }
    manifests = {
        "run": run,
        "protocol": protocol,
        "environment": environment,
        "implementation": copy.deepcopy(solution.implementation),
        "workload": case,
    }
    check_manifest_set(manifests)
    artifacts = [*solution.artifacts, folder.definition_artifact]
    if evidence is not snapshot:
        artifacts.append(evidence)
    return ImportRecord(
        source=SOURCE,
        external_id=external_id,
        manifests=manifests,
        snapshot=snapshot,
        artifacts=tuple(artifacts),
    )


def map_sol_execbench(files: Mapping[str, bytes]) -> Iterator[ImportRecord | Rejection]:
    """A benchmark folder's traces as runs (one per trace line), or rejections with reasons.

    ``files`` maps file names (``definition.json``, ``workload.jsonl``, ``solution*.json``,
    ``trace*.jsonl``) to their bytes. Without trace files one :class:`Skipped` says so.
    """
    trace_files = sorted(n for n in files if re.fullmatch(r"trace.*\.jsonl", n))
    folder = _read_folder(files)
    if not trace_files:
        solutions = sum(1 for n in files if re.fullmatch(r"solution.*\.json", n))
        held = [
            *(["a definition"] if "definition.json" in files else []),
            f"{len(folder.entries)} workload entries",
            f"{solutions} solution(s)",
        ]
        yield Skipped(
            None,
            f"no trace*.jsonl in the folder ({', '.join(held)}): a run is a trace's result, so "
            "there is no run to import (solutions are kept as implementations, not runs)",
        )
        return
    for file_name in trace_files:
        for number, trace in _jsonl(files[file_name]):
            if isinstance(trace, DomainError):
                yield Rejection(None, f"{file_name} line {number}: {trace.message}")
                continue
            try:
                yield _trace_record(trace, folder)
            except DomainError as exc:
                yield Rejection(_trace_id(trace), f"{file_name} line {number}: {exc.message}")


def _trace_id(trace: Mapping[str, Any]) -> str | None:
    try:
        workload = _object(trace.get("workload"), "trace 'workload'")
        evaluation = _object(trace.get("evaluation"), "trace 'evaluation'")
        environment = _object(evaluation.get("environment"), "environment")
        hardware = _string(environment, "hardware", "environment")
        solution = _string(trace, "solution", "trace")
        return f"trace/{solution}/{workload_entry_key(workload)}/{hardware}"
    except DomainError:
        return None
