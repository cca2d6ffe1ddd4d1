"""SOL-ExecBench example folders with one trace written beside them, for rerun tests.

The shipped example folders (``conformance/fixtures/sol-execbench/<lang>-<name>/``) hold a
definition, workloads and a solution but no trace, so an import of them makes no run. These
helpers add one PASSED trace line in the documented format (``docs/trace.md``) for the first
workload, measured on a B200, which is what a SOL-ExecBench evaluation of the example writes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.paths import FIXTURES

SOL_EXAMPLES = FIXTURES / "sol-execbench"
FLASHINFER = FIXTURES / "flashinfer-trace"


def folder_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def first_workload(name: str) -> dict[str, Any]:
    lines = (SOL_EXAMPLES / name / "workload.jsonl").read_text().splitlines()
    entry: dict[str, Any] = json.loads(lines[0])
    return entry


def definition_of(name: str) -> dict[str, Any]:
    definition: dict[str, Any] = json.loads((SOL_EXAMPLES / name / "definition.json").read_text())
    return definition


def example_trace(name: str) -> dict[str, Any]:
    """A PASSED B200 trace of the folder's one solution on its first workload."""
    files = folder_files(SOL_EXAMPLES / name)
    [solution] = [json.loads(v) for k, v in files.items() if k.startswith("solution")]
    return {
        "definition": definition_of(name)["name"],
        "solution": solution["name"],
        "workload": first_workload(name),
        "evaluation": {
            "status": "PASSED",
            "log": "",
            "correctness": {"max_relative_error": 1e-5, "max_absolute_error": 1e-5},
            "performance": {
                "latency_ms": 0.0125,
                "reference_latency_ms": 0.02,
                "speedup_factor": 1.6,
            },
            "environment": {"hardware": "NVIDIA_B200", "libs": {"cuda": "12.8", "torch": "2.7.0"}},
            "timestamp": "2026-06-27T12:45:00Z",
        },
    }


def traced_files(name: str) -> dict[str, bytes]:
    """The example folder's files with its trace added as ``trace.jsonl``."""
    files = folder_files(SOL_EXAMPLES / name)
    files["trace.jsonl"] = json.dumps(example_trace(name)).encode() + b"\n"
    return files


def traced_folder(name: str, target: Path) -> Path:
    """A copy of the example folder with its trace, under ``target``."""
    copied = shutil.copytree(SOL_EXAMPLES / name, target / name)
    (copied / "trace.jsonl").write_bytes(traced_files(name)["trace.jsonl"])
    return copied
