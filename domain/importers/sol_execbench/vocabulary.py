"""SOL-ExecBench's names for dtypes, languages and GPUs → KernelIndex's.

The tables follow KernelIndex's own SOL importer, so that the operation, implementation and
environment manifests digest as the catalog's do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from domain.importers.sol_execbench.fields import JsonObject
from domain.sources import SOL_EXECBENCH

SOURCE: Final = SOL_EXECBENCH  # domain.sources: one name for readers and importers
COMPARATOR: Final = "sol_execbench_eval"

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
# Built as C++ extensions: without a stated binding, a solution in one is called via PyTorch.
CPP_LANGUAGES: Final = frozenset({"cuda_cpp", "cutlass", "cudnn", "cublas"})


def identifier_like(value: str) -> str:
    """Lower case, every character outside ``[a-z0-9_]`` → ``_``."""
    return re.sub(r"[^a-z0-9_]", "_", value.lower())


def map_dtype(dtype: str) -> str:
    """SOL dtype → KernelIndex dtype (``bfloat16`` → ``bf16``); others pass, normalised."""
    return _DTYPES.get(dtype) or identifier_like(dtype)


def map_language(language: str) -> str:
    return _LANGUAGES.get(language) or identifier_like(language)


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


def architecture_of_product(product: str) -> str | None:
    """The architecture of a GPU product as runs name it (``"NVIDIA B200"`` → ``sm_100``), or
    None for a product not in the table. For sources whose environments state the product
    only (FlashInfer-Bench's say ``unknown``): a product has one architecture."""
    found = {hardware.product: hardware.architecture for hardware in _HARDWARE.values()}
    return found.get(product)
