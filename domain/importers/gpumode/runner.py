"""The KernelBot runner: its evaluation protocol, and each runner GPU as an environment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from domain.importers.catalog_form import manifest
from domain.importers.gpumode.dataset import COMPARATOR
from domain.importers.names import MAX_TITLE, clip, object_name
from domain.manifests.kinds import API_VERSION

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
