"""GPU MODE KernelBot leaderboard results → KernelIndex manifests (pure: bytes in, records out).

Input: a page of the ``GPUMODE/kernelbot-data`` dataset as the Hugging Face datasets server
returns it (``{"rows": [{"row": {...}, "truncated_cells": [...]}, ...]}``) or a bare list of
rows. A submission row (``submission_id``, ``leaderboard_id``, ``run_result``...) of a ranked
(``run_mode: leaderboard``) run yields one :class:`ImportRecord` per benchmark case in
``run_result`` (``benchmark.<i>.{spec,mean,best,worst,std,runs}``), exactly as the KernelIndex
catalog represents KernelBot per-case results:

* protocol ``gpumode-kernelbot-eval`` (per-case wall-clock mean, ``kernelbot_eval``);
* environment ``gpumode-kernelbot-<gpu>`` from ``run_system_info.gpu`` (vendor, product,
  architecture; runner software rides the run's labels);
* workload ``WorkloadCase`` of the problem's ``OperationSpec``: the case's axes parsed from
  ``benchmark.<i>.spec`` (``"k: 7168; m: 1024; n: 1536; seed: 8135"``), input tensors with
  their shapes resolved;
* implementation ``ImplementationRevision`` ``kernelbot-submission-<id>`` (source pinned by
  digest when the row carries its code);
* run: ``timing.latencyNs`` mean/minimum/maximum = Math.round of mean/best/worst ns,
  ``samples`` = runs, a ``latency:std:ns`` measurement, ``sourceNative`` =
  ``{source: gpumode-kernelbot, benchmark: "<leaderboard>/<i>", externalId:
  "submission/<id>", metrics: {best_ns, mean_ns, leaderboard_score_s}}``, ``observedAt`` =
  submission time.

KernelBot rows name a leaderboard by id only and carry no operation semantics, so the problems
this importer knows are listed in :data:`KNOWN_PROBLEMS` (their OperationSpecs transcribed from
``gpu-mode/reference-kernels`` exactly as the catalog holds them); a leaderboard listing
(``leaderboards.json``) may be passed to name other leaderboard ids. A leaderboard listing
given as ``data`` describes no results: each of its rows gives a :class:`Skipped` saying so.

A row whose ``code`` is null (the dataset keeps some code apart, by ``code_id``) gives an
implementation without ``source``: the mapper cannot pin bytes it does not have. The catalog
holds such submissions with their source pinned; the importer keeps that richer run rather
than supersede it (:mod:`ledger.importing`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from domain.documents import parse_json
from domain.errors import DomainError
from domain.importers.flashinfer_trace import (
    API_VERSION,
    MAX_TITLE,
    RECORD_ERRORS,
    MappingError,
    as_object,
    axis_values,
    checked,
    clip,
    file_artifact,
    identifier,
    input_dtypes,
    integer,
    js_round,
    json_artifact,
    manifest,
    numeric_text,
    object_name,
    reason,
    resolve_shape,
    text,
    utc_millis,
)
from domain.importers.records import Artifact, ImportRecord, Rejection, Skipped
from domain.manifests.canonical_form import manifest_digest

SOURCE: Final = "gpumode-kernelbot"
DATASET_URL: Final = "https://huggingface.co/datasets/GPUMODE/kernelbot-data"
COMPARATOR: Final = "kernelbot_eval"
RANKED_RUN_MODE: Final = "leaderboard"

EVAL_PROTOCOL: Final[Mapping[str, Any]] = {
    "apiVersion": API_VERSION,
    "kind": "BenchmarkProtocol",
    "metadata": {
        "name": "gpumode-kernelbot-eval",
        "title": "GPU MODE KernelBot evaluation harness",
    },
    "spec": {
        "harness": {
            "name": "reference-kernels eval.py",
            "repository": "https://github.com/gpu-mode/reference-kernels",
        },
        "correctness": {"reference": "problem reference implementation", "comparator": COMPARATOR},
        "measurement": {"timer": "wall_clock", "primaryStatistic": "mean"},
        "comparability": {
            "notes": "Per-case wall-clock statistics as published in the KernelBot dataset. "
            "Comparable only within one leaderboard problem and GPU type; runner software "
            "versions ride each run's labels.",
            "family": "gpumode_kernelbot",
        },
    },
}

# KernelBot runner GPUs: product prefix → (vendor, architecture).
GPUS: Final[Mapping[str, tuple[str, str]]] = {
    "AMD Instinct MI300X": ("amd", "gfx942"),
    "AMD Instinct MI355X": ("amd", "gfx950"),
    "NVIDIA B200": ("nvidia", "sm_100"),
    "NVIDIA H100": ("nvidia", "sm_90"),
    "NVIDIA A100": ("nvidia", "sm_80"),
    "NVIDIA L4": ("nvidia", "sm_89"),
}


@dataclass(frozen=True)
class Problem:
    """A KernelBot leaderboard problem this importer can describe."""

    leaderboard: str  # leaderboard name, e.g. "amd-fp8-mm"
    operation: Mapping[str, Any]  # its OperationSpec manifest

    @property
    def slug(self) -> str:
        return str(self.operation["metadata"]["name"])

    @property
    def title(self) -> str:
        return str(self.operation["metadata"]["title"])


def _variable() -> dict[str, str]:
    return {"role": "variable", "type": "integer"}


def _constant(value: int) -> dict[str, Any]:
    return {"role": "constant", "type": "integer", "value": value}


def _derived(expression: str) -> dict[str, Any]:
    return {"role": "derived", "type": "integer", "expression": expression}


def _tensor(name: str, dtype: str, shape: list[str], layout: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"dtype": dtype, "shape": shape}
    if layout is not None:
        body["layout"] = layout
    return {"name": name, "tensor": body}


_NO_MUTATION: Final = {"mutation": "none", "determinism": "unspecified"}
_REFERENCE_KERNELS: Final = "https://github.com/gpu-mode/reference-kernels/blob/main/problems/amd"

KNOWN_PROBLEMS: Final[Mapping[str, Problem]] = {
    "amd-fp8-mm": Problem(
        "amd-fp8-mm",
        manifest(
            "OperationSpec",
            {
                "name": "gpumode-amd-fp8-mm",
                "title": "AMD FP8 blockwise GEMM",
                "sourceRefs": [{"url": f"{_REFERENCE_KERNELS}/fp8-mm/task.yml"}],
                "description": "FP8-blockwise matrix multiply optimized for MI300: A (m×k) and "
                "B (n×k) in e4m3fnuz column-major with fp32 blockwise scales (128-wide k blocks), "
                "output C (m×n) in bf16 row-major. Shapes are drawn from DeepSeek-R1.",
            },
            {
                "axes": {
                    "k": _variable(),
                    "m": _variable(),
                    "n": _variable(),
                    "seed": _variable(),
                    "k_blocks": _derived("k // 128"),
                    "n_blocks": _derived("n // 128"),
                },
                "family": "gemm",
                "inputs": [
                    _tensor("a", "fp8_e4m3fnuz", ["m", "k"], "col_major"),
                    _tensor("b", "fp8_e4m3fnuz", ["n", "k"], "col_major"),
                    _tensor("a_scale", "fp32", ["m", "k_blocks"], "col_major"),
                    _tensor("b_scale", "fp32", ["n_blocks", "k_blocks"], "col_major"),
                ],
                "outputs": [_tensor("c", "bf16", ["m", "n"], "row_major")],
                "semantics": dict(_NO_MUTATION),
            },
        ),
    ),
    "amd-mixture-of-experts": Problem(
        "amd-mixture-of-experts",
        manifest(
            "OperationSpec",
            {
                "name": "gpumode-amd-moe",
                "title": "AMD DeepSeek-style MoE layer",
                "sourceRefs": [{"url": f"{_REFERENCE_KERNELS}/moe/task.yml"}],
                "description": "DeepSeek-style mixture-of-experts layer on a single MI300X: "
                "softmax router, top-k routing to routed plus shared experts, fp16 activations. "
                "Expert/router weights and configuration accompany the input tensor as described "
                "upstream.",
            },
            {
                "axes": {
                    name: _variable()
                    for name in (
                        "bs",
                        "seed",
                        "seqlen",
                        "dexpert",
                        "dhidden",
                        "nroutedexperts",
                        "nsharedexperts",
                        "nexpertspertoken",
                    )
                },
                "family": "moe",
                "inputs": [_tensor("input", "fp16", ["bs", "seqlen", "dhidden"])],
                "outputs": [_tensor("output", "fp16", ["bs", "seqlen", "dhidden"])],
                "semantics": dict(_NO_MUTATION),
            },
        ),
    ),
    "amd-mla-decode": Problem(
        "amd-mla-decode",
        manifest(
            "OperationSpec",
            {
                "name": "gpumode-amd-mla-decode",
                "title": "AMD MLA decode",
                "sourceRefs": [{"url": f"{_REFERENCE_KERNELS}/mla-decode/task.yml"}],
                "description": "Multi-head latent attention decode for MI300: bf16 Q/K/V, "
                "non-paged pre-allocated latent KV cache, single decode step over a variable "
                "prefill length. Dimensions follow DeepSeek-R1/V3 (hidden 7168, 128 heads, "
                "kv-lora rank 512, rope dim 64).",
            },
            {
                "axes": {
                    "dq": _variable(),
                    "sq": _constant(1),
                    "dim": _variable(),
                    "seed": _variable(),
                    "kv_dim": _derived("kv_lora_rank + qk_rope_head_dim"),
                    "n_heads": _constant(128),
                    "prefill": _variable(),
                    "batchsize": _variable(),
                    "v_head_dim": _constant(128),
                    "kv_lora_rank": _constant(512),
                    "qk_rope_head_dim": _constant(64),
                },
                "family": "mla-attention",
                "inputs": [
                    _tensor("input", "bf16", ["batchsize", "sq", "dim"]),
                    _tensor("kv_cache", "bf16", ["batchsize", "prefill", "kv_dim"]),
                ],
                "outputs": [
                    _tensor("attn_output", "bf16", ["batchsize", "n_heads", "sq", "v_head_dim"]),
                    _tensor("kv_cache_out", "bf16", ["batchsize", "prefill", "kv_dim"]),
                ],
                "semantics": dict(_NO_MUTATION),
            },
        ),
    ),
}

# Leaderboard ids of the known problems (from the dataset's leaderboard table).
KNOWN_LEADERBOARD_IDS: Final[Mapping[int, str]] = {
    399: "amd-fp8-mm",
    430: "amd-mixture-of-experts",
    463: "amd-mla-decode",
}


@dataclass(frozen=True)
class Leaderboard:
    """One row of the dataset's leaderboard table."""

    id: int
    name: str
    gpu_types: tuple[str, ...]
    row: Mapping[str, Any]


def _rows(document: object, where: str) -> list[Any]:
    if isinstance(document, list):
        return document
    if isinstance(document, dict) and isinstance(document.get("rows"), list):
        return list(document["rows"])
    raise MappingError(f"{where}: expected {{'rows': [...]}} or a list of rows")


def _unwrap(item: object, where: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """(row, truncated cells) of a datasets-server item or of a bare row."""
    body = as_object(item, where)
    if "row" in body and isinstance(body["row"], dict):
        truncated = body.get("truncated_cells") or []
        cells = tuple(str(c) for c in truncated) if isinstance(truncated, list) else ()
        return body["row"], cells
    return body, ()


def parse_leaderboards(data: bytes) -> dict[int, Leaderboard]:
    """The leaderboard table (``leaderboards.json``) by id; raises DomainError if malformed."""
    result: dict[int, Leaderboard] = {}
    for index, item in enumerate(_rows(parse_json(data), "leaderboards")):
        row, _ = _unwrap(item, f"leaderboards[{index}]")
        board_id = integer(row.get("id"), f"leaderboards[{index}].id")
        gpu_types = row.get("gpu_types") or []
        result[board_id] = Leaderboard(
            id=board_id,
            name=text(row.get("name"), f"leaderboards[{index}].name"),
            gpu_types=tuple(str(g) for g in gpu_types) if isinstance(gpu_types, list) else (),
            row=row,
        )
    return result


def kernelbot_external_id(submission: str, benchmark: str, environment: str) -> str:
    """The ledger's id of one KernelBot result.

    ``sourceNative.externalId`` (``submission/<id>``) names the submission, which yields one run
    per benchmark case and per runner GPU; the ledger needs one id per run, so the benchmark
    (``<leaderboard>/<case>`` or the leaderboard) and the environment name qualify it. The
    catalog importer uses the same rule, so a result imported from both sources keeps one id.
    """
    return f"{submission}#{benchmark}@{environment}"


def environment_manifest(gpu: str) -> dict[str, Any]:
    """A KernelBot runner GPU (``run_system_info.gpu``) as an execution environment."""
    known = [facts for prefix, facts in GPUS.items() if gpu.startswith(prefix)]
    if known:
        vendor, architecture = known[0]
    else:
        upper = gpu.upper()
        vendor = "amd" if upper.startswith("AMD") else "nvidia" if "NVIDIA" in upper else "unknown"
        architecture = "unknown"
    return manifest(
        "ExecutionEnvironment",
        {
            "name": object_name("gpumode-kernelbot", gpu),
            "title": clip(f"KernelBot runner · {gpu}", MAX_TITLE),
        },
        {
            "hardware": {"vendor": vendor, "product": gpu, "architecture": architecture},
            "software": {},
        },
    )


def parse_case_spec(spec: str, where: str) -> dict[str, int]:
    """``"k: 7168; m: 1024; seed: 8135"`` → ``{"k": 7168, "m": 1024, "seed": 8135}``."""
    axes: dict[str, int] = {}
    for part in spec.split(";"):
        if not part.strip():
            continue
        key, sep, value = part.partition(":")
        if not sep:
            raise MappingError(f"{where}: {part.strip()!r} is not 'name: value'")
        name = identifier(key, where)
        try:
            axes[name] = int(value.strip())
        except ValueError:
            raise MappingError(
                f"{where}: axis {name} = {value.strip()!r} is not an integer"
            ) from None
    if not axes:
        raise MappingError(f"{where}: no axes in {spec!r}")
    return axes


def _statistic(result: Mapping[str, Any], prefix: str, key: str, *, required: bool = True) -> Any:
    """``run_result["<prefix>.<key>"]`` as a number (positive, except ``std``), or None."""
    value = result.get(f"{prefix}.{key}")
    if value is None:
        if required:
            raise MappingError(f"run_result.{prefix}.{key} is missing")
        return None
    return numeric_text(value, f"run_result.{prefix}.{key}", positive=key != "std")


def _workload(
    problem: Problem, operation_digest: str, axes: dict[str, int], where: str
) -> dict[str, Any]:
    op_axes = problem.operation["spec"]["axes"]
    for name in axes:
        if op_axes.get(name, {}).get("role") != "variable":
            raise MappingError(f"{where}: {name!r} is not a variable axis of {problem.leaderboard}")
    values = axis_values(op_axes, axes, where)
    tensors = {
        item["name"]: {
            "dtype": item["tensor"]["dtype"],
            "shape": resolve_shape(item["tensor"]["shape"], values, f"{where}: {item['name']}"),
        }
        for item in problem.operation["spec"]["inputs"]
        if "tensor" in item
    }
    ordered = sorted(axes)
    return manifest(
        "WorkloadCase",
        {
            "name": object_name(problem.slug, *(f"{k}{axes[k]}" for k in ordered)),
            "title": clip(
                f"{problem.title} · " + ", ".join(f"{k}={v}" for k, v in axes.items()), MAX_TITLE
            ),
        },
        {
            "axes": axes,
            "tensors": tensors,
            "correctness": {"comparator": COMPARATOR},
            "operationSpecDigest": operation_digest,
        },
    )


def _implementation(
    row: Mapping[str, Any],
    truncated: tuple[str, ...],
    submission: int,
    leaderboard: str,
    problem: Problem,
    operation_digest: str,
    environment: Mapping[str, Any],
) -> tuple[dict[str, Any], tuple[Artifact, ...]]:
    file_name = row.get("file_name")
    file_name = file_name if isinstance(file_name, str) and file_name else "submission.py"
    language = "cuda" if file_name.endswith((".cu", ".cuh")) else "python"
    hardware = environment["spec"]["hardware"]
    spec: dict[str, Any] = {
        "support": {
            "dtypes": input_dtypes(problem.operation),
            "productsTested": [hardware["product"]],
            "hardwareArchitectures": [hardware["architecture"]],
        },
        "callable": {"language": language},
        "licensing": {},
        "operation": {"specDigest": operation_digest},
        "projectRevision": {"version": f"submission-{submission}"},
    }
    artifacts: tuple[Artifact, ...] = ()
    code = row.get("code")
    # Only complete code pins the implementation; a truncated cell would pin the wrong bytes.
    if isinstance(code, str) and code and "code" not in truncated:
        artifact = file_artifact(code.encode("utf-8"), file_name)
        spec["source"] = {
            "fileName": file_name,
            "sizeBytes": len(artifact.content),
            "contentDigest": artifact.digest,
        }
        artifacts = (artifact,)
    metadata = {
        "name": object_name("kernelbot-submission", str(submission)),
        "title": clip(f"{leaderboard} · submission {submission}", MAX_TITLE),
        "sourceRefs": [{"url": DATASET_URL}],
        "description": clip(file_name, 2000),
    }
    return manifest("ImplementationRevision", metadata, spec), artifacts


def map_gpumode(
    data: bytes, name: str, *, leaderboards: Mapping[int, Leaderboard] | None = None
) -> Iterator[ImportRecord | Rejection]:
    """One record per benchmark case of each ranked submission run in ``data``, or a rejection.

    ``name`` names the document (used in artifact names and reasons). ``leaderboards``
    (from :func:`parse_leaderboards`) maps leaderboard ids to names; without it the ids of
    :data:`KNOWN_LEADERBOARD_IDS` are used. A leaderboard listing yields nothing.
    """
    try:
        items = _rows(parse_json(data), name)
    except DomainError as exc:
        yield Rejection(None, f"{name}: {exc.message}")
        return
    if not items:
        yield Skipped(None, f"{name}: no rows, so there is no run to import")
    for index, item in enumerate(items):
        where = f"{name}#rows[{index}]"
        submission_ref: str | None = None
        try:
            row, truncated = _unwrap(item, where)
            if "leaderboard_id" not in row and "gpu_types" in row:
                yield Skipped(
                    f"leaderboard/{row.get('id')}",
                    f"{where}: leaderboard {row.get('name')!r} is a leaderboard, not a "
                    "submission result, so there is no run to import (a leaderboard listing "
                    "names leaderboard ids when given as leaderboards)",
                )
                continue
            submission = integer(row.get("submission_id"), f"{where}.submission_id")
            submission_ref = f"submission/{submission}"
            board_id = integer(row.get("leaderboard_id"), f"{where}.leaderboard_id")
            board = leaderboards.get(board_id) if leaderboards is not None else None
            board_name = board.name if board is not None else KNOWN_LEADERBOARD_IDS.get(board_id)
            if board_name is None:
                raise MappingError(
                    f"leaderboard {board_id} is unknown (pass the leaderboard table)"
                )
            yield from _map_row(row, truncated, where, submission, board_name, board)
        except RECORD_ERRORS as exc:
            yield Rejection(submission_ref, f"{where}: {reason(exc)}")


def _map_row(
    row: dict[str, Any],
    truncated: tuple[str, ...],
    where: str,
    submission: int,
    leaderboard: str,
    board: Leaderboard | None,
) -> Iterator[ImportRecord | Rejection]:
    problem = KNOWN_PROBLEMS.get(leaderboard)
    if problem is None:
        raise MappingError(
            f"leaderboard {leaderboard!r} has no known OperationSpec; "
            f"known: {', '.join(sorted(KNOWN_PROBLEMS))}"
        )
    mode = row.get("run_mode")
    if mode != RANKED_RUN_MODE:
        raise MappingError(f"run_mode {mode!r} is not a ranked leaderboard run")
    passed = row.get("run_passed")
    if passed is not True:
        if passed is False:
            raise MappingError(
                "run_passed is false: KernelBot does not say how the run failed, and no "
                "BenchmarkRun status fits without guessing"
            )
        raise MappingError(f"run_passed must be true or false, got {passed!r}")
    observed_at = utc_millis(row.get("submission_time"), f"{where}.submission_time")
    result = as_object(row.get("run_result"), f"{where}.run_result")
    count = integer(
        numeric_text(result.get("benchmark-count"), "benchmark-count"), "benchmark-count"
    )
    if count == 0:
        raise MappingError("run_result has no benchmark cases")
    system = as_object(row.get("run_system_info") or {}, f"{where}.run_system_info")
    gpu = text(system.get("gpu"), f"{where}.run_system_info.gpu")
    environment = environment_manifest(gpu)
    environment_digest = manifest_digest(environment)
    protocol = copy.deepcopy(dict(EVAL_PROTOCOL))
    protocol_digest = manifest_digest(protocol)
    operation_digest = manifest_digest(problem.operation)
    implementation, code = _implementation(
        row, truncated, submission, leaderboard, problem, operation_digest, environment
    )
    implementation_digest = manifest_digest(implementation)
    score = row.get("run_score")
    labels = {
        key: clip(value, MAX_TITLE)
        for key in ("torch", "platform")
        if isinstance(value := system.get(key), str) and value
    }
    snapshot = json_artifact(row, f"{where}:submission-{submission}")
    context = (json_artifact(board.row, f"leaderboard:{board.name}"),) if board else ()
    for case in range(count):
        benchmark = f"{leaderboard}/{case}"
        external_id = kernelbot_external_id(
            f"submission/{submission}", benchmark, environment["metadata"]["name"]
        )
        try:
            prefix = f"benchmark.{case}"
            spec_text = text(result.get(f"{prefix}.spec"), f"run_result.{prefix}.spec")
            axes = parse_case_spec(spec_text, f"run_result.{prefix}.spec")
            workload = _workload(problem, operation_digest, axes, f"case {case}")

            mean = _statistic(result, prefix, "mean")
            best, worst, std, runs = (
                _statistic(result, prefix, key, required=False)
                for key in ("best", "worst", "std", "runs")
            )
            latency: dict[str, int] = {"mean": js_round(mean)}
            if best is not None:
                latency["minimum"] = js_round(best)
            if worst is not None:
                latency["maximum"] = js_round(worst)
            timing: dict[str, Any] = {"latencyNs": latency, "primaryStatistic": "mean"}
            samples = integer(runs, f"run_result.{prefix}.runs") if runs is not None else None
            if samples is not None:
                timing["samples"] = samples
            metrics: dict[str, Any] = {"mean_ns": mean}
            if best is not None:
                metrics["best_ns"] = best
            if score is not None:
                metrics["leaderboard_score_s"] = numeric_text(score, f"{where}.run_score")
            run_spec: dict[str, Any] = {
                "status": "passed",
                "timing": timing,
                "observedAt": observed_at,
                "sourceNative": {
                    "source": SOURCE,
                    "metrics": metrics,
                    "benchmark": benchmark,
                    "externalId": f"submission/{submission}",
                },
                "protocolDigest": protocol_digest,
                "workloadDigest": manifest_digest(workload),
                "environmentDigest": environment_digest,
                "implementationDigest": implementation_digest,
            }
            if std is not None:
                measurement: dict[str, Any] = {
                    "unit": "ns",
                    "value": std,
                    "metric": "latency",
                    "statistic": "std",
                }
                if samples is not None:
                    measurement["sampleCount"] = samples
                run_spec["measurements"] = [measurement]
            metadata: dict[str, Any] = {
                "name": object_name(
                    "kernelbot", str(submission), *(f"{k}{axes[k]}" for k in sorted(axes))
                ),
                "title": clip(f"{leaderboard} · submission {submission} · case {case}", MAX_TITLE),
            }
            if labels:
                metadata["labels"] = labels
            yield checked(
                ImportRecord(
                    source=SOURCE,
                    external_id=external_id,
                    manifests={
                        "run": manifest("BenchmarkRun", metadata, run_spec),
                        "protocol": protocol,
                        "environment": environment,
                        "implementation": implementation,
                        "workload": workload,
                    },
                    snapshot=snapshot,
                    artifacts=(*context, *code),
                )
            )
        except RECORD_ERRORS as exc:
            yield Rejection(external_id, f"{where} case {case}: {reason(exc)}")
