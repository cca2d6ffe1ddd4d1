"""The rerun agent on the cpu-test backend: what an honest rerun costs, and where it goes.

Two figures (issue 32 §7), neither of which a unit test may assert (the machine is shared):

* ``rerun``: an honest PyTorch RMSNorm solution rerun over the 14 workloads of SOL-ExecBench's
  RMSNorm fixture (conformance/fixtures/sol-execbench/triton-rmsnorm), through
  ``gpu_agent.harness.run_job`` exactly as ``kernelindex agent --backend cpu-test`` runs it
  (``HarnessConfig()``: spawned children, the default stop rule for the backend). Printed:
  each case's wall time, samples and the whole job's time; with ``--phases``, the cost of
  one child start with torch imported, of one round's inputs, reference and solution call,
  and of one timed call's fresh inputs, for the largest case.
* ``compare``: ``gpu_agent.checks.compare`` of a 4096 × 14336 bfloat16 output against
  itself (silu_and_mul's largest case), best of 3 (it once took ~9 s with float64
  temporaries; the unit test keeps only that the comparison is right).

    python -m benchmarks.bench_agent [--cases N] [--phases] [--only rerun|compare] [--gpu-stop]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from gpu_agent.checks import Tolerance, compare
from gpu_agent.harness import HarnessConfig, JobSpec, run_job
from gpu_agent.stats import StopPolicy

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "conformance" / "fixtures" / "sol-execbench" / "triton-rmsnorm"
# An honest RMSNorm in PyTorch, written for this benchmark (the reference's arithmetic).
SOLUTION_SOURCE = """\
import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5)
    return ((x * inv_rms) * weight.to(torch.float32)).to(hidden_states.dtype)
"""
JOB_ID = "00000000-0000-4000-8000-000000000032"
NONCE = "32" * 32


def rmsnorm_job(cases: int | None = None) -> JobSpec:
    definition = json.loads((FIXTURE / "definition.json").read_text())
    lines = (FIXTURE / "workload.jsonl").read_text().splitlines()
    workloads = [json.loads(line) for line in lines if line.strip()][:cases]
    solution = {
        "name": "rmsnorm_pytorch_bench",
        "definition": definition["name"],
        "author": "benchmarks",
        "spec": {
            "language": "pytorch",
            "target_hardware": ["LOCAL"],
            "entry_point": "kernel.py::run",
            "dependencies": ["torch"],
            "destination_passing_style": False,
        },
        "sources": [{"path": "kernel.py", "content": SOLUTION_SOURCE}],
    }
    return JobSpec(JOB_ID, NONCE, solution, definition, workloads)


def rerun(cases: int | None, stop: StopPolicy | None = None) -> dict[str, Any]:
    job = rmsnorm_job(cases)
    rows: list[dict[str, Any]] = []
    last = time.perf_counter()

    def on_case(record: dict[str, Any]) -> None:
        nonlocal last
        now = time.perf_counter()
        rows.append(
            {
                "case": record["case"][:8],
                "status": record["status"],
                "samples": record.get("samples", 0),
                "seconds": round(now - last, 2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        last = now

    started = time.perf_counter()
    result = run_job(job, "cpu-test", HarnessConfig(stop=stop), on_case=on_case)
    total = time.perf_counter() - started
    return {
        "cases": rows,
        "all_correct": result["summary"]["allCorrect"],
        "total_s": round(total, 1),
    }


def _seconds(fn: Any, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def phases() -> dict[str, float]:
    """One-off costs behind a case, for the largest of the 14 workloads (batch 14509)."""
    import torch  # noqa: PLC0415 - only this figure needs it

    from gpu_agent.definition import parse_definition  # noqa: PLC0415
    from gpu_agent.python_solutions import torch_io  # noqa: PLC0415
    from gpu_agent.workload import parse_workload  # noqa: PLC0415

    torch.set_num_threads(1)
    job = rmsnorm_job()
    definition = parse_definition(job.definition)
    largest = max(job.workloads, key=lambda w: w["axes"]["batch_size"])
    workload = parse_workload(largest, definition)
    device = torch.device("cpu")
    namespace: dict[str, Any] = {}
    exec(compile(definition.reference or "", "reference", "exec"), namespace)  # noqa: S102
    exec(compile(SOLUTION_SOURCE, "solution", "exec"), namespace)  # noqa: S102
    values = torch_io.make_inputs(definition, workload, 1, device, None)
    x, w = values["hidden_states"], values["weight"]
    assert isinstance(x, torch.Tensor) and isinstance(w, torch.Tensor)
    child = [sys.executable, "-c", "import torch"]
    return {
        "child start + import torch, s": _seconds(
            lambda: subprocess.run(child, check=True)  # noqa: S603 - our interpreter, our code
        ),
        "inputs of one round, s": _seconds(
            lambda: torch_io.make_inputs(definition, workload, 1, device, None)
        ),
        "reference, one round, s": _seconds(lambda: namespace["run"](x, w)),
        "solution, one call, s": _seconds(lambda: namespace["run"](x, w)),
        "fresh inputs of one timed call (randn), s": _seconds(
            lambda: x.copy_(torch.randn(x.shape))
        ),
    }


def compare_large() -> float:
    bf16 = np.dtype(ml_dtypes.bfloat16)
    ref = np.random.default_rng(0).standard_normal(4096 * 14336, dtype=np.float32).astype(bf16)
    out = ref.copy()
    return _seconds(lambda: compare(out, ref, Tolerance()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=None, help="the first N workloads only")
    parser.add_argument("--phases", action="store_true", help="also time one case's parts")
    parser.add_argument("--only", choices=("rerun", "compare"), default=None)
    parser.add_argument(
        "--gpu-stop",
        action="store_true",
        help="time by the GPU's stop rule (what cpu-test used before it had its own)",
    )
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}
    if args.only in (None, "compare"):
        report["compare 4096x14336 bf16, best of 3, s"] = round(compare_large(), 3)
        print(json.dumps(report), flush=True)
    if args.phases:
        report["phases"] = {k: round(v, 3) for k, v in phases().items()}
        print(json.dumps(report["phases"]), flush=True)
    if args.only in (None, "rerun"):
        report["rerun"] = rerun(args.cases, StopPolicy() if args.gpu_stop else None)
    print(json.dumps(report, indent=1))
    return 0 if report.get("rerun", {}).get("all_correct", True) else 1


if __name__ == "__main__":
    raise SystemExit(main())
