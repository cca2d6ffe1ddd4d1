"""A FlashInfer-Bench trace's ``evaluation`` → the run's measured part and its environment.

Status mapped from the trace status, ``latencyNs.mean`` = round(latency_ms·10⁶) rounded half
up like JavaScript's ``Math.round``, ``observedAt`` = the trace timestamp truncated to
milliseconds, UTC; the protocol is the one FlashInfer-Bench harness, the environment one per
reported hardware and software (``sol-trace-…``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from domain.importers.catalog_form import latency_ns, manifest, utc_millis
from domain.importers.fields import MappingError, as_object, field, identifier, number, text
from domain.importers.flashinfer_trace.dataset import RUN_COMPARATOR, SOURCE
from domain.importers.names import MAX_TITLE, clip, object_name
from domain.manifests.kinds import API_VERSION

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

_ERROR_BOUNDS: Final = (
    ("max_absolute_error", "maximumAbsoluteError"),
    ("max_relative_error", "maximumRelativeError"),
)


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


def _correctness(correctness: object) -> dict[str, Any]:
    block = as_object(correctness, "evaluation.correctness")
    stated: dict[str, Any] = {"comparator": RUN_COMPARATOR}
    for source_key, target in _ERROR_BOUNDS:
        if block.get(source_key) is not None:
            stated[target] = number(block[source_key], f"evaluation.correctness.{source_key}")
    return stated


def _performance(performance: object) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(timing, metrics)`` of ``evaluation.performance``."""
    block = as_object(performance, "evaluation.performance")
    latency = number(
        field(block, "latency_ms", "evaluation.performance"),
        "evaluation.performance.latency_ms",
        positive=True,
    )
    timing = {"latencyNs": {"mean": latency_ns(latency)}, "primaryStatistic": "mean"}
    metrics: dict[str, Any] = {"latency_ms": latency}
    for key in ("reference_latency_ms", "speedup_factor"):
        if block.get(key) is not None:
            metrics[key] = number(block[key], f"evaluation.performance.{key}")
    return timing, metrics


def run_spec(evaluation: Mapping[str, Any], definition_name: str) -> dict[str, Any]:
    """The measured part of the run: status, correctness, timing, source-native metrics."""
    raw_status = text(evaluation.get("status"), "evaluation.status")
    status = STATUSES.get(raw_status)
    if status is None:
        raise MappingError(f"evaluation.status {raw_status!r} is not a FlashInfer-Bench status")
    spec: dict[str, Any] = {"status": status}
    spec["observedAt"] = utc_millis(evaluation.get("timestamp"), "evaluation.timestamp")
    correctness = evaluation.get("correctness")
    if correctness is not None:
        spec["correctness"] = _correctness(correctness)
    native: dict[str, Any] = {"source": SOURCE, "benchmark": definition_name}
    performance = evaluation.get("performance")
    if performance is not None:
        spec["timing"], native["metrics"] = _performance(performance)
    elif status == "passed":
        raise MappingError("a PASSED evaluation must report performance.latency_ms")
    spec["sourceNative"] = native
    return spec
