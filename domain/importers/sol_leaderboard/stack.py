"""The protocol and environment of one leaderboard evaluation stack (KernelIndex's, verbatim).

For B200 / v1.1 they digest to the seed's ``sha256:6383f624…`` and ``sha256:f304afb2…``.
"""

from __future__ import annotations

from domain.importers.names import MAX_TITLE, clip
from domain.importers.sol_execbench.fields import JsonObject
from domain.importers.sol_execbench.values import kebab
from domain.importers.sol_execbench.vocabulary import COMPARATOR, map_hardware
from domain.manifests.kinds import API_VERSION


def leaderboard_protocol(stack_version: str) -> JsonObject:
    """The protocol of one leaderboard evaluation stack version (KernelIndex's, verbatim)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkProtocol",
        "metadata": {
            "name": f"sol-execbench-leaderboard-{kebab(stack_version)}",
            "title": clip(f"SOL-ExecBench evaluation stack {stack_version}", MAX_TITLE),
        },
        "spec": {
            "harness": {"name": "SOL-ExecBench evaluation stack", "version": stack_version},
            "measurement": {"timer": "harness_reported", "primaryStatistic": "mean"},
            "correctness": {
                "reference": "definition reference implementation",
                "comparator": COMPARATOR,
            },
            "comparability": {
                "family": "sol_execbench_leaderboard",
                "notes": "Suite-mean latency and SOL-Score as published by the SOL-ExecBench "
                "leaderboard. Comparable only within one definition, GPU type, and evaluation "
                "stack version.",
            },
        },
    }


def leaderboard_environment(gpu_type: str, stack_version: str) -> JsonObject:
    """The environment of one GPU type and stack version (KernelIndex's, verbatim)."""
    hardware = map_hardware(gpu_type)
    return {
        "apiVersion": API_VERSION,
        "kind": "ExecutionEnvironment",
        "metadata": {
            "name": f"sol-execbench-{kebab(gpu_type)}-{kebab(stack_version)}",
            "title": clip(f"SOL-ExecBench {hardware.product}, stack {stack_version}", MAX_TITLE),
        },
        "spec": {
            "hardware": hardware.as_json(),
            "software": {"libraries": {"evaluation_stack": stack_version}},
        },
    }
