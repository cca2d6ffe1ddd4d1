"""The KernelBot leaderboard problems this importer can describe, and their leaderboard ids.

KernelBot rows name a leaderboard by id only and carry no operation semantics, so each known
problem's ``OperationSpec`` is transcribed here from ``gpu-mode/reference-kernels``, exactly as
the KernelIndex catalog holds it (the tests check the digests).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from domain.importers.catalog_form import manifest


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
