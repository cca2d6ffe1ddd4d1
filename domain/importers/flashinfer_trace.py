"""FlashInfer-Bench traces → KernelIndex manifests (pure: bytes in, records out).

Input: the files of a FlashInfer-Bench dataset folder (``flashinfer-ai/flashinfer-trace``),
keyed by name: definitions (``{"name", "op_type", "axes", "inputs", "outputs", ...}``),
solutions (``{"name", "definition", "author", "spec", "sources", ...}``) and traces
(``*.jsonl``, one evaluation per line). Every trace line with an evaluation becomes one
:class:`ImportRecord`; whatever cannot be mapped becomes a :class:`Rejection` with the reason,
and the other lines still come out.

The shapes follow the KernelIndex catalog export (source ``flashinfer-bench``), so that a trace
the catalog also holds maps to the very same manifests and digests:

* definition → ``OperationSpec`` (``var``/``const``/``expr`` axes → variable/constant/derived,
  ``op_type`` → family, scalar inputs have ``shape: null``, reference → ``{language: python}``);
* trace workload → ``WorkloadCase`` named ``<definition>-<uuid[:8]>``: the variable axes, one
  tensor per tensor input (shape resolved, ``data.generator`` = the input's ``type``), scalar
  inputs under ``scalars``, correctness comparator ``sol_execbench_eval`` (sic, as the catalog);
* solution → ``ImplementationRevision``: the entry-point file is ``source`` (content digest,
  size), ``callable`` from ``spec.entry_point``, support dtypes = the definition's input dtypes,
  products = ``spec.target_hardware``, architectures ``["unknown"]``, licensing Apache-2.0 (the
  dataset's), ``projectRevision`` = the dataset repository and, when known, its commit;
* evaluation → ``BenchmarkRun`` (status mapped from the trace status, ``latencyNs.mean`` =
  round(latency_ms·10⁶) rounded half up like JavaScript's ``Math.round``, ``observedAt`` = the
  trace timestamp truncated to milliseconds, UTC), protocol ``flashinfer-bench-trace`` and an
  environment per reported hardware and software (``sol-trace-…``).

The dataset commit is not inside the files, but the catalog pins it in every implementation
(``projectRevision.commit``); pass ``dataset_revision`` to reproduce the catalog's digests.

A record's external id (:func:`trace_external_id`) is made of what the run's manifests keep, so
the catalog importer derives the same id from a catalog run (:func:`external_id_of`): a trace
imported from both sources has one id, and the ledger tells "unchanged" from "changed".
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from domain import expressions
from domain.canonical import canonical_json
from domain.documents import parse_json
from domain.errors import DomainError
from domain.importers.records import Artifact, ImportRecord, Rejection, Skipped
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.manifest_set import check_manifest_set

SOURCE: Final = "flashinfer-bench"
DATASET_REPOSITORY: Final = "https://huggingface.co/datasets/flashinfer-ai/flashinfer-trace"
DATASET_LICENSE: Final = "Apache-2.0"
API_VERSION: Final = "kernelindex.dev/v1alpha1"
# The catalog states this comparator on FlashInfer runs and workloads (the protocol says
# flashinfer_bench_eval); kept verbatim so that digests and comparison keys agree.
RUN_COMPARATOR: Final = "sol_execbench_eval"
MAX_NAME: Final = 100  # the catalog truncates object names to 100 characters
MAX_TITLE: Final = 200
MAX_DESCRIPTION: Final = 2000
MAX_SAFE_INTEGER: Final = 2**53 - 1

PROTOCOL: Final[Mapping[str, Any]] = {
    "apiVersion": API_VERSION,
    "kind": "BenchmarkProtocol",
    "metadata": {"name": "flashinfer-bench-trace", "title": "FlashInfer-Bench trace harness"},
    "spec": {
        "harness": {
            "name": "flashinfer-bench",
            "repository": "https://github.com/flashinfer-ai/flashinfer-bench",
        },
        "correctness": {
            "reference": "definition reference implementation",
            "comparator": "flashinfer_bench_eval",
        },
        "measurement": {"timer": "harness_reported", "primaryStatistic": "mean"},
        "comparability": {"family": "flashinfer_bench_trace"},
    },
}

STATUSES: Final[Mapping[str, str]] = {
    "PASSED": "passed",
    "INCORRECT_SHAPE": "incorrect_shape",
    "INCORRECT_NUMERICAL": "incorrect_numerical",
    "INCORRECT_DTYPE": "incorrect_dtype",
    "RUNTIME_ERROR": "runtime_error",
    "COMPILE_ERROR": "compile_error",
    "TIMEOUT": "timeout",
}

# FlashInfer (torch) dtype names → KernelIndex dtype identifiers.
DTYPES: Final[Mapping[str, str]] = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "float64": "fp64",
    "double": "fp64",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e4m3fnuz": "fp8_e4m3fnuz",
    "float8_e5m2": "fp8_e5m2",
    "float8_e5m2fnuz": "fp8_e5m2fnuz",
}

_MEDIA_TYPES: Final[Mapping[str, str]] = {
    ".py": "text/x-python",
    ".cu": "text/x-cuda",
    ".cuh": "text/x-cuda",
    ".cpp": "text/x-c++src",
    ".cc": "text/x-c++src",
    ".h": "text/x-c",
    ".hpp": "text/x-c++hdr",
}

_IDENTIFIER: Final = re.compile(r"[a-z][a-z0-9_]*")


class MappingError(DomainError):
    """A source record lacks what the mapping needs, or holds a value it cannot accept."""

    code = "unmappable-record"


# --- typed access to parsed JSON ---------------------------------------------------------------


def as_object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MappingError(f"{where} must be an object")
    return value


def field(record: Mapping[str, Any], key: str, where: str) -> Any:
    """``record[key]``, which must be present and not null."""
    value = record.get(key)
    if value is None:
        raise MappingError(f"{where}.{key} is missing")
    return value


def text(value: object, where: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise MappingError(f"{where} must be a non-empty string")
    return value


def number(value: object, where: str, *, positive: bool = False) -> int | float:
    """A finite, non-negative JSON number (positive if asked); integral floats become ints."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MappingError(f"{where} must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise MappingError(f"{where} must be finite, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise MappingError(f"{where} must be {'positive' if positive else 'non-negative'}: {value}")
    return int(value) if isinstance(value, float) and value.is_integer() else value


def integer(value: object, where: str) -> int:
    if isinstance(value, bool) or not (
        isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    ):
        raise MappingError(f"{where} must be an integer, got {value!r}")
    return int(value)


def numeric_text(value: object, where: str, *, positive: bool = False) -> int | float:
    """A number, or a string holding one (KernelBot stores its results as strings)."""
    if isinstance(value, str):
        try:
            parsed = float(value)
        except ValueError:
            raise MappingError(f"{where} must be a number, got {value!r}") from None
        return number(parsed, where, positive=positive)
    return number(value, where, positive=positive)


def identifier(value: str, where: str) -> str:
    """Lower snake case, as the schemas' identifiers (dtype, language, generator...)."""
    result = re.sub(r"[^a-z0-9_]+", "_", value.strip().lower()).strip("_")
    if not _IDENTIFIER.fullmatch(result):
        raise MappingError(f"{where}: {value!r} cannot be written as an identifier")
    return result


# --- names, numbers and times as the catalog writes them ---------------------------------------


def slug(value: str) -> str:
    """``"NVIDIA B200"`` → ``"nvidia-b200"``; ``"2.8.0+cu128"`` → ``"2-8-0-cu128"``."""
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")


def object_name(*parts: str) -> str:
    """A metadata name: the slugs of ``parts`` joined by ``-``, at most 100 characters."""
    joined = "-".join(p for p in (slug(part) for part in parts) if p)[:MAX_NAME].rstrip("-.")
    return joined or "unnamed"


def clip(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def js_round(value: float) -> int:
    """JavaScript's ``Math.round`` (halves round up), exact for every double."""
    if not math.isfinite(value) or abs(value) > MAX_SAFE_INTEGER:
        raise MappingError(f"{value!r} is out of range for a whole number of ns")
    floor = math.floor(value)
    return int(floor) + 1 if value - floor >= 0.5 else int(floor)


def latency_ns(milliseconds: float) -> int:
    """round(ms · 10⁶) computed as KernelIndex does (a double product, then Math.round)."""
    return js_round(milliseconds * 1e6)


def utc_millis(value: object, where: str) -> str:
    """An ISO 8601 time as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC, truncated to milliseconds).

    This is what JavaScript's ``new Date(s).toISOString()`` gives; a time without an offset
    is taken as UTC.
    """
    raw = text(value, where)
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise MappingError(f"{where}: {raw!r} is not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    parsed = parsed.astimezone(UTC)
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.") + f"{parsed.microsecond // 1000:03d}Z"


def sorted_unique(values: Iterable[str]) -> list[str]:
    """Sorted as the canonical form sorts set-like lists (UTF-16 code units)."""
    return sorted(set(values), key=lambda item: item.encode("utf-16-be"))


def manifest(kind: str, metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def json_artifact(value: object, name: str) -> Artifact:
    """The canonical JSON bytes of a source record, kept by digest."""
    return Artifact(canonical_json(value), "application/json", name)


def file_artifact(content: bytes, path: str) -> Artifact:
    suffix = path[path.rfind(".") :].lower() if "." in path else ""
    return Artifact(content, _MEDIA_TYPES.get(suffix, "text/plain"), path)


def reason(exc: Exception) -> str:
    """Why a record was rejected, from a domain error or an unexpected shape of input."""
    if isinstance(exc, DomainError):
        return exc.message
    return f"malformed record ({type(exc).__name__}: {exc})"


# What a per-record mapping may raise on bad input; caught so the other records still come out.
RECORD_ERRORS: Final = (DomainError, KeyError, TypeError, ValueError, ArithmeticError)


def checked(record: ImportRecord) -> ImportRecord:
    """The record, once its manifest set validates and its digests agree (else raises)."""
    check_manifest_set(record.manifests)
    return record


# --- axis expressions --------------------------------------------------------------------------


def evaluate(expression: str, lookup: Callable[[str], int], where: str) -> int:
    """An integer axis expression (``k // 128``, ``a + b``) in the one expression language
    (``domain.expressions``, extended: ``/`` must divide exactly); ``lookup`` gives each
    axis's value and says itself what is wrong with one it lacks."""
    try:
        return expressions.evaluate(
            expression, lookup, extended=True, bound=expressions.MAX_SAFE_INTEGER
        )
    except expressions.ExpressionError as exc:
        raise MappingError(f"{where}: {exc.message}") from None


def axis_values(
    operation_axes: Mapping[str, Any], variables: Mapping[str, int], where: str
) -> dict[str, int]:
    """Every axis of an OperationSpec: variables given, constants stated, derived computed."""
    values: dict[str, int] = {}
    resolving: set[str] = set()

    def lookup(name: str) -> int:
        if name in values:
            return values[name]
        axis = operation_axes.get(name)
        if axis is None:
            raise MappingError(f"{where}: unknown axis {name!r}")
        role = axis.get("role")
        if role == "variable":
            if name not in variables:
                raise MappingError(f"{where}: variable axis {name!r} has no value")
            values[name] = variables[name]
        elif role == "constant":
            values[name] = integer(axis.get("value"), f"{where}: axis {name}")
        else:
            if name in resolving:
                raise MappingError(f"{where}: axis {name!r} is defined in terms of itself")
            resolving.add(name)
            values[name] = evaluate(text(axis.get("expression"), name), lookup, where)
            resolving.discard(name)
        return values[name]

    for name in operation_axes:
        lookup(name)
    return values


def resolve_shape(shape: Iterable[int | str], axes: Mapping[str, int], where: str) -> list[int]:
    resolved: list[int] = []
    for dimension in shape:
        value = axes.get(dimension) if isinstance(dimension, str) else dimension
        if value is None:
            raise MappingError(f"{where}: shape names unknown axis {dimension!r}")
        if value < 0:
            raise MappingError(f"{where}: dimension {dimension!r} is negative ({value})")
        resolved.append(value)
    return resolved


def input_dtypes(operation: Mapping[str, Any]) -> list[str]:
    """The dtypes of an OperationSpec's inputs (the catalog's ``support.dtypes``)."""
    found: list[str] = []
    for item in operation["spec"]["inputs"]:
        body = item.get("tensor") or item.get("scalar") or {}
        if "dtype" in body:
            found.append(body["dtype"])
    return sorted_unique(found)


# --- FlashInfer documents ----------------------------------------------------------------------


def _dtype(value: object, where: str) -> str:
    name = text(value, where)
    return DTYPES.get(name.lower(), identifier(name, where))


def operation_spec(definition: Mapping[str, Any], revision: str | None = None) -> dict[str, Any]:
    """A FlashInfer definition as an ``OperationSpec`` manifest (the catalog's shape)."""
    name = text(definition.get("name"), "definition.name")
    where = f"definition {name}"
    axes: dict[str, Any] = {}
    for axis_name, raw_axis in as_object(field(definition, "axes", where), f"{where}.axes").items():
        axis = as_object(raw_axis, f"{where}.axes.{axis_name}")
        kind = axis.get("type")
        key = identifier(axis_name, f"{where}.axes")
        if kind == "var":
            axes[key] = {"role": "variable", "type": "integer"}
        elif kind == "const":
            value = integer(axis.get("value"), f"{where}.axes.{axis_name}.value")
            axes[key] = {"role": "constant", "type": "integer", "value": value}
        elif kind == "expr":
            expression = text(axis.get("expression"), f"{where}.axes.{axis_name}.expression")
            axes[key] = {"role": "derived", "type": "integer", "expression": expression}
        else:
            raise MappingError(f"{where}: axis {axis_name!r} has unknown type {kind!r}")

    def tensors(group: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        block = as_object(field(definition, group, where), f"{where}.{group}")
        for tensor_name, raw in block.items():
            body = as_object(raw, f"{where}.{group}.{tensor_name}")
            dtype = _dtype(body.get("dtype"), f"{where}.{group}.{tensor_name}.dtype")
            shape = body.get("shape")
            entry: dict[str, Any] = {"name": identifier(tensor_name, f"{where}.{group}")}
            if shape is None:
                entry["scalar"] = {"dtype": dtype}
            elif isinstance(shape, list) and shape:
                dims = [d if isinstance(d, str) else integer(d, f"{where}.{group}") for d in shape]
                entry["tensor"] = {"dtype": dtype, "shape": dims}
            else:
                raise MappingError(f"{where}.{group}.{tensor_name}.shape must be a list or null")
            items.append(entry)
        return items

    spec: dict[str, Any] = {
        "family": slug(text(definition.get("op_type"), f"{where}.op_type")),
        "axes": axes,
        "inputs": tensors("inputs"),
        "outputs": tensors("outputs"),
        "semantics": {"mutation": "none", "determinism": "unspecified"},
    }
    if definition.get("reference") is not None:
        spec["reference"] = {"language": "python"}
    metadata: dict[str, Any] = {"name": object_name(name), "title": clip(name, MAX_TITLE)}
    description = definition.get("description")
    if isinstance(description, str) and description:
        metadata["description"] = clip(description, MAX_DESCRIPTION)
    if revision is not None:
        metadata["sourceRefs"] = [{"url": f"{DATASET_REPOSITORY}/blob/{revision}/definitions"}]
    return manifest("OperationSpec", metadata, spec)


def _workload(
    definition: Mapping[str, Any],
    operation: Mapping[str, Any],
    operation_digest: str,
    raw_workload: Mapping[str, Any],
) -> dict[str, Any]:
    name = definition["name"]
    uuid = text(raw_workload.get("uuid"), "workload.uuid")
    raw_axes = as_object(field(raw_workload, "axes", "workload"), "workload.axes")
    op_axes = operation["spec"]["axes"]
    variables: dict[str, int] = {}
    for axis_name, value in raw_axes.items():
        if op_axes.get(axis_name, {}).get("role") != "variable":
            raise MappingError(f"workload axis {axis_name!r} is not a variable axis of {name}")
        variables[axis_name] = integer(value, f"workload.axes.{axis_name}")
    missing = [
        a for a, body in op_axes.items() if body["role"] == "variable" and a not in variables
    ]
    if missing:
        raise MappingError(f"workload gives no value for axes {', '.join(missing)}")
    axes = axis_values(op_axes, variables, f"workload of {name}")
    inputs = as_object(field(raw_workload, "inputs", "workload"), "workload.inputs")
    tensors: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    for item in operation["spec"]["inputs"]:
        input_name = item["name"]
        given = as_object(field(inputs, input_name, "workload.inputs"), f"input {input_name}")
        kind = text(given.get("type"), f"workload.inputs.{input_name}.type")
        if "scalar" in item:
            if kind != "scalar":
                raise MappingError(f"input {input_name} is a scalar but the trace gives {kind!r}")
            value = given.get("value")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise MappingError(f"workload.inputs.{input_name}.value must be a number")
            scalars[input_name] = {"dtype": item["scalar"]["dtype"], "value": value}
            continue
        tensor = item["tensor"]
        tensors[input_name] = {
            "shape": resolve_shape(tensor["shape"], axes, f"input {input_name}"),
            "dtype": tensor["dtype"],
            "data": {"generator": identifier(kind, f"workload.inputs.{input_name}.type")},
        }
    spec: dict[str, Any] = {
        "operationSpecDigest": operation_digest,
        "axes": variables,
        "tensors": tensors,
        "correctness": {"comparator": RUN_COMPARATOR},
    }
    if scalars:
        spec["scalars"] = scalars
    summary = ", ".join(f"{key}={value}" for key, value in variables.items())
    metadata = {
        "name": object_name(name, uuid[:8]),
        "title": clip(f"{name} · {summary}" if summary else name, MAX_TITLE),
    }
    return manifest("WorkloadCase", metadata, spec)


def _implementation(
    solution: Mapping[str, Any],
    operation: Mapping[str, Any],
    operation_digest: str,
    revision: str | None,
) -> tuple[dict[str, Any], tuple[Artifact, ...]]:
    name = text(solution.get("name"), "solution.name")
    where = f"solution {name}"
    spec = as_object(field(solution, "spec", where), f"{where}.spec")
    language = identifier(text(spec.get("language"), f"{where}.spec.language"), where)
    entry = text(spec.get("entry_point"), f"{where}.spec.entry_point")
    path, _, symbol = entry.partition("::")
    raw_sources = field(solution, "sources", where)
    if not isinstance(raw_sources, list) or not raw_sources:
        raise MappingError(f"{where}.sources must be a non-empty list")
    artifacts: list[Artifact] = []
    entry_artifact: Artifact | None = None
    for index, raw in enumerate(raw_sources):
        source = as_object(raw, f"{where}.sources[{index}]")
        source_path = text(source.get("path"), f"{where}.sources[{index}].path")
        content = text(source.get("content"), f"{where}.sources[{index}].content", allow_empty=True)
        artifact = file_artifact(content.encode("utf-8"), source_path)
        artifacts.append(artifact)
        if source_path == path:
            entry_artifact = artifact
    if entry_artifact is None:
        raise MappingError(f"{where}: entry point file {path!r} is not among its sources")
    hardware = spec.get("target_hardware") or []
    if not isinstance(hardware, list):
        raise MappingError(f"{where}.spec.target_hardware must be a list")
    callable_: dict[str, Any] = {"language": language, "path": path}
    if symbol:
        callable_["symbol"] = symbol
    source_spec: dict[str, Any] = {
        "contentDigest": entry_artifact.digest,
        "fileName": path.rsplit("/", 1)[-1],
    }
    if entry_artifact.content:
        source_spec["sizeBytes"] = len(entry_artifact.content)
    project_revision: dict[str, Any] = {"repository": DATASET_REPOSITORY}
    if revision is not None:
        project_revision["commit"] = revision
    impl_spec: dict[str, Any] = {
        "source": source_spec,
        "support": {
            "dtypes": input_dtypes(operation),
            "productsTested": sorted_unique(
                text(h, f"{where}.spec.target_hardware") for h in hardware
            ),
            "hardwareArchitectures": ["unknown"],
        },
        "callable": callable_,
        "licensing": {"declared": DATASET_LICENSE, "concluded": DATASET_LICENSE},
        "operation": {"specDigest": operation_digest},
        "projectRevision": project_revision,
    }
    metadata: dict[str, Any] = {"name": object_name(name), "title": clip(name, MAX_TITLE)}
    author = solution.get("author")
    if isinstance(author, str) and author:
        metadata["authors"] = [{"name": clip(author, MAX_TITLE)}]
    description = solution.get("description")
    if isinstance(description, str) and description:
        metadata["description"] = clip(description, MAX_DESCRIPTION)
    if revision is not None and isinstance(author, str):
        definition = solution.get("definition")
        family = operation["spec"]["family"].replace("-", "_")
        metadata["sourceRefs"] = [
            {
                "url": f"{DATASET_REPOSITORY}/blob/{revision}/solutions/{author}/{family}/"
                f"{definition}/{name}.json"
            }
        ]
    return manifest("ImplementationRevision", metadata, impl_spec), tuple(artifacts)


def environment_manifest(reported: Mapping[str, Any]) -> dict[str, Any]:
    """``evaluation.environment`` (hardware and library versions) as an environment."""
    hardware = text(reported.get("hardware"), "evaluation.environment.hardware")
    raw_libs = reported.get("libs") or {}
    libs = as_object(raw_libs, "evaluation.environment.libs")
    lowered = hardware.lower()
    vendor = "nvidia" if lowered.startswith("nvidia") else "amd" if "amd" in lowered else "unknown"
    software: dict[str, Any] = {}
    libraries: dict[str, str] = {}
    name_parts = [hardware]
    torch = libs.get("torch")
    if torch is not None:
        software["framework"] = {"name": "pytorch", "version": text(torch, "libs.torch")}
        name_parts.append(torch)
    for lib, version in libs.items():
        if lib in ("torch", "cuda"):
            continue
        libraries[identifier(lib, "evaluation.environment.libs")] = text(version, f"libs.{lib}")
        name_parts.append(version)
    if libraries:
        software["libraries"] = libraries
    cuda = libs.get("cuda")
    if cuda is not None:
        software["cudaToolkit"] = text(cuda, "libs.cuda")
        name_parts.append(cuda)
    return manifest(
        "ExecutionEnvironment",
        {
            "name": object_name("sol-trace", *name_parts),
            "title": clip(f"{hardware} (trace-reported software)", MAX_TITLE),
        },
        {
            "hardware": {"vendor": vendor, "product": hardware, "architecture": "unknown"},
            "software": software,
        },
    )


def _run_spec(evaluation: Mapping[str, Any], definition_name: str) -> dict[str, Any]:
    """The measured part of the run: status, correctness, timing, source-native metrics."""
    raw_status = text(evaluation.get("status"), "evaluation.status")
    status = STATUSES.get(raw_status)
    if status is None:
        raise MappingError(f"evaluation.status {raw_status!r} is not a FlashInfer-Bench status")
    spec: dict[str, Any] = {"status": status}
    spec["observedAt"] = utc_millis(evaluation.get("timestamp"), "evaluation.timestamp")
    correctness = evaluation.get("correctness")
    if correctness is not None:
        block = as_object(correctness, "evaluation.correctness")
        stated: dict[str, Any] = {"comparator": RUN_COMPARATOR}
        for source_key, target in (
            ("max_absolute_error", "maximumAbsoluteError"),
            ("max_relative_error", "maximumRelativeError"),
        ):
            if block.get(source_key) is not None:
                stated[target] = number(block[source_key], f"evaluation.correctness.{source_key}")
        spec["correctness"] = stated
    native: dict[str, Any] = {"source": SOURCE, "benchmark": definition_name}
    performance = evaluation.get("performance")
    if performance is not None:
        block = as_object(performance, "evaluation.performance")
        latency = number(
            field(block, "latency_ms", "evaluation.performance"),
            "evaluation.performance.latency_ms",
            positive=True,
        )
        spec["timing"] = {"latencyNs": {"mean": latency_ns(latency)}, "primaryStatistic": "mean"}
        metrics: dict[str, Any] = {"latency_ms": latency}
        for key in ("reference_latency_ms", "speedup_factor"):
            if block.get(key) is not None:
                metrics[key] = number(block[key], f"evaluation.performance.{key}")
        native["metrics"] = metrics
    elif status == "passed":
        raise MappingError("a PASSED evaluation must report performance.latency_ms")
    spec["sourceNative"] = native
    return spec


# --- the mapper --------------------------------------------------------------------------------


def trace_external_id(definition: str, solution: str, workload_uuid: str, observed_at: str) -> str:
    """The ledger's id of one trace: ``<definition>:<solution>:<uuid[:8]>:<observedAt>``.

    Only what a run's manifests keep goes in (``sourceNative.benchmark``, the implementation's
    title, the workload name's uuid prefix, ``observedAt`` in milliseconds), so that
    :func:`external_id_of` gives the same id for the catalog's copy of the run.
    """
    return f"{definition}:{clip(solution, MAX_TITLE)}:{workload_uuid[:8].lower()}:{observed_at}"


def external_id_of(manifests: Mapping[str, Any]) -> str | None:
    """:func:`trace_external_id` of a FlashInfer run's manifest set (the catalog's, say), or
    None when the set lacks what the id is made of (no implementation or workload, a workload
    name not of the form ``<definition>-<uuid[:8]>``)."""
    run_spec = manifests["run"]["spec"]
    native = run_spec.get("sourceNative") or {}
    definition, observed = native.get("benchmark"), run_spec.get("observedAt")
    implementation, workload = manifests.get("implementation"), manifests.get("workload")
    if not isinstance(definition, str) or not isinstance(observed, str):
        return None
    if not isinstance(implementation, Mapping) or not isinstance(workload, Mapping):
        return None
    solution = implementation["metadata"].get("title")
    name = workload["metadata"].get("name")
    if not isinstance(solution, str) or not isinstance(name, str):
        return None
    prefix = name.rpartition("-")[2]
    if not re.fullmatch(r"[0-9a-f]{8}", prefix) or object_name(definition, prefix) != name:
        return None
    return trace_external_id(definition, solution, prefix, observed)


def _classify(document: object) -> str | None:
    if not isinstance(document, dict):
        return None
    if "sources" in document and "definition" in document:
        return "solution"
    if "op_type" in document or ("axes" in document and "inputs" in document):
        return "definition"
    return None


def _trace_lines(name: str, data: bytes) -> Iterator[tuple[str, bytes]]:
    for number_, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            yield f"{name}#{number_}", line


def map_flashinfer_trace(
    files: Mapping[str, bytes], *, dataset_revision: str | None = None
) -> Iterator[ImportRecord | Rejection]:
    """One record per trace line of ``files`` (name → bytes), or a rejection saying why.

    ``*.jsonl`` files are traces; ``*.json`` files are definitions or solutions (told apart by
    their fields); files without a trace give one :class:`Skipped` saying so.
    ``dataset_revision`` is the 40-hex commit of ``flashinfer-trace`` the files come from,
    pinned in every implementation (the catalog pins ``da915083d4c7c5e61aa3005e3d17ae488e0fc71c``).
    Deterministic: the same files give the same records, in file-name then line order.
    """
    if dataset_revision is not None and not re.fullmatch(r"[0-9a-f]{40}", dataset_revision):
        raise ValueError("dataset_revision must be a 40-hex git commit")
    definitions: dict[str, dict[str, Any]] = {}
    solutions: dict[str, dict[str, Any]] = {}
    traces: list[tuple[str, bytes]] = []
    for name in sorted(files):
        data = files[name]
        if name.endswith(".jsonl"):
            traces.extend(_trace_lines(name, data))
            continue
        try:
            document = parse_json(data)
        except DomainError as exc:
            yield Rejection(None, f"{name}: {exc.message}")
            continue
        kind = _classify(document)
        if kind == "definition":
            definitions[str(document.get("name"))] = document
        elif kind == "solution":
            solutions[str(document.get("name"))] = document
        else:
            yield Rejection(None, f"{name}: neither a FlashInfer definition nor a solution")

    operations: dict[str, tuple[dict[str, Any], str] | str] = {}

    def operation_of(definition_name: str) -> tuple[dict[str, Any], str]:
        if definition_name not in operations:
            if definition_name not in definitions:
                operations[definition_name] = (
                    f"definition {definition_name!r} is not among the files"
                )
            else:
                try:
                    op = operation_spec(definitions[definition_name], dataset_revision)
                    operations[definition_name] = (op, manifest_digest(op))
                except RECORD_ERRORS as exc:
                    operations[definition_name] = f"definition {definition_name}: {reason(exc)}"
        found = operations[definition_name]
        if isinstance(found, str):
            raise MappingError(found)
        return found

    if not traces:
        yield Skipped(
            None,
            f"no trace (*.jsonl) among the files: {len(definitions)} definition(s) and "
            f"{len(solutions)} solution(s) hold no result, so there is no run to import",
        )
    for where, line in traces:
        external_id: str | None = None
        try:
            trace = as_object(parse_json(line), "trace")
            definition_name = text(trace.get("definition"), "trace.definition")
            solution_name = text(trace.get("solution"), "trace.solution")
            raw_workload = as_object(field(trace, "workload", "trace"), "trace.workload")
            evaluation = as_object(field(trace, "evaluation", "trace"), "trace.evaluation")
            uuid = text(raw_workload.get("uuid"), "trace.workload.uuid")
            timestamp = text(evaluation.get("timestamp"), "trace.evaluation.timestamp")
            external_id = f"{definition_name}:{solution_name}:{uuid}:{timestamp}"  # for reasons
            external_id = trace_external_id(
                definition_name,
                solution_name,
                uuid,
                utc_millis(timestamp, "trace.evaluation.timestamp"),
            )
            yield _map_trace(
                trace,
                where,
                external_id,
                definitions.get(definition_name, {}),
                operation_of(definition_name),
                solutions.get(solution_name),
                dataset_revision,
            )
        except RECORD_ERRORS as exc:
            yield Rejection(external_id, f"{where}: {reason(exc)}")


def _map_trace(
    trace: dict[str, Any],
    where: str,
    external_id: str,
    definition: dict[str, Any],
    operation: tuple[dict[str, Any], str],
    solution: dict[str, Any] | None,
    revision: str | None,
) -> ImportRecord:
    op, op_digest = operation
    definition_name = definition["name"]
    solution_name = trace["solution"]
    if solution is None:
        raise MappingError(f"solution {solution_name!r} is not among the files")
    if solution.get("definition") != definition_name:
        raise MappingError(f"solution {solution_name} implements {solution.get('definition')!r}")
    evaluation = trace["evaluation"]
    run_spec = _run_spec(evaluation, definition_name)
    environment = environment_manifest(
        as_object(field(evaluation, "environment", "evaluation"), "evaluation.environment")
    )
    workload = _workload(definition, op, op_digest, trace["workload"])
    implementation, sources = _implementation(solution, op, op_digest, revision)
    artifacts = [
        json_artifact(definition, f"definition:{definition_name}"),
        json_artifact(solution, f"solution:{solution_name}"),
        *sources,
    ]
    log = evaluation.get("log")
    if log:
        log_artifact = Artifact(text(log, "evaluation.log").encode("utf-8"), "text/plain", "log")
        artifacts.append(log_artifact)
        run_spec["evidence"] = {
            "logs": {
                "uri": f"kernelindex:artifact/{log_artifact.digest}",
                "digest": log_artifact.digest,
            }
        }
    protocol = copy.deepcopy(dict(PROTOCOL))
    run_spec.update(
        {
            "implementationDigest": manifest_digest(implementation),
            "workloadDigest": manifest_digest(workload),
            "protocolDigest": manifest_digest(protocol),
            "environmentDigest": manifest_digest(environment),
        }
    )
    run = manifest(
        "BenchmarkRun",
        {
            "name": object_name("sol-trace", definition_name, trace["workload"]["uuid"][:8]),
            "title": clip(f"{solution_name} · {definition_name}", MAX_TITLE),
        },
        run_spec,
    )
    return checked(
        ImportRecord(
            source=SOURCE,
            external_id=external_id,
            manifests={
                "run": run,
                "protocol": protocol,
                "environment": environment,
                "implementation": implementation,
                "workload": workload,
            },
            snapshot=json_artifact(trace, where),
            artifacts=tuple(artifacts),
        )
    )
