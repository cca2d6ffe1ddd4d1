"""Self-check of the rerun agent on a real device: every sample, end to end (DESIGN.md §11).

``python -m gpu_agent.selfcheck`` (what ``gpu_agent/selfcheck.sh`` runs after installing what
it needs) runs each sample of ``gpu_agent/samples`` as a rerun job through the production
harness (``gpu_agent.harness.run_job``: child process per case, compile, poisoned correctness
rounds, timing, post-timing round, roofline floor) on the measuring backend, then:

* honest samples: every case must pass; each case's median is compared with the same kernel
  timed independently (``gpu_agent/backends/crosscheck.py``: torch events when torch sees
  the GPU, else a separate driver-event loop) — the ratio must be within ``--ratio-tolerance``
  (3 % by default);
* adversarial samples: some case must be refused, by the check the sample names
  (``gpu_agent.samples.SAMPLES``), and no case may fail for another reason;
* every result is signed as a rerun/v1 envelope with a throwaway agent key and the signature
  verified, so the result is what the in-process ledger would be handed. (Admission into a
  ledger, with a job request and claim, follows once the job protocol lands.)

It prints one table row per case and exits non-zero on any failure. ``--backend cpu-test``
runs the same logic on CPU with the samples' emulations (``gpu_agent/samples/emulations.py``;
no ratio check: CPU times say nothing about a GPU), which is how CI tests this script.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from domain.canonical import digest_of
from gpu_agent import checks, inputs, stats
from gpu_agent.backends import crosscheck as independent
from gpu_agent.backends.base import Backend, KernelArg
from gpu_agent.backends.registry import CPU_TEST, GPU_BACKEND, create_backend
from gpu_agent.definition import parse_definition
from gpu_agent.harness import HarnessConfig, HarnessError, JobSpec, run_job
from gpu_agent.launch_spec import resolve_launch
from gpu_agent.samples import (
    SAMPLE_JOB_ID,
    SAMPLE_NONCE,
    Sample,
    SampleInfo,
    load_sample,
    sample_names,
)
from gpu_agent.sol_parsing import SolutionError
from gpu_agent.solution import parse_solution
from gpu_agent.workload import parse_workload
from ledger.signing.authoring import rerun_envelope
from ledger.signing.dsse import parse_envelope, verify_envelope
from ledger.signing.keys import SigningKey

DEFAULT_RATIO_TOLERANCE = 0.03
DEFAULT_DEADLINE_S = 420.0
CROSSCHECK_SAMPLES = 200
EMULATIONS = "gpu_agent.samples.emulations"

# What a refusal by each check looks like in a harness case record.
_REASON_MARKERS = {
    "poison": "unwritten output",
    "mutation": "input mutation",
    "tolerance": "tolerance:",
}


@dataclass
class CaseRow:
    sample: str
    case: str
    axes: str
    status: str
    median_ns: float | None = None
    ci95_ns: tuple[float, float] | None = None
    samples: int | None = None
    independent_ns: float | None = None
    method: str | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.median_ns is None or not self.independent_ns:
            return None
        return self.median_ns / self.independent_ns


@dataclass
class SampleReport:
    name: str
    ok: bool
    verdict: str
    rows: list[CaseRow] = field(default_factory=list)
    result: dict[str, Any] | None = None


def _stop_policy(quick: bool) -> stats.StopPolicy:
    if quick:  # CI on CPU: enough samples for the statistics, not for precision
        return stats.StopPolicy(
            warmup=2, batch=20, min_samples=20, target_rse=0.05, max_samples=40, time_budget_s=2
        )
    return stats.StopPolicy(
        warmup=10, batch=50, min_samples=50, target_rse=0.005, max_samples=1000, time_budget_s=5
    )


def _axes_text(workload: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in workload["axes"].items())


def _refusal_check(info: SampleInfo, record: Mapping[str, Any]) -> str | None:
    """Which check refused the case (``poison``...), or None if it passed."""
    status, reason = record["status"], str(record.get("reason", ""))
    if status == "passed":
        return None
    if status == "impossible_time":
        return "floor"
    if status == "incorrect":
        for check, marker in _REASON_MARKERS.items():
            if marker in reason:
                return check
    return f"{status}: {reason[:200]}"


def judge(info: SampleInfo, result: Mapping[str, Any]) -> tuple[bool, str]:
    """Did the harness treat this sample as it must? ``(ok, explanation)``."""
    cases = result["cases"]
    if info.honest:
        failed = [c for c in cases if c["status"] != "passed"]
        if failed:
            first = failed[0]
            return False, f"honest sample refused: {first['status']}: {first.get('reason', '')}"
        return True, "all cases passed"
    verdicts = [(_refusal_check(info, c), c) for c in cases]
    caught = [(check, c) for check, c in verdicts if check is not None]
    if not caught:
        return False, f"NOT CAUGHT: every case passed (expected the {info.caught_by} check)"
    wrong = [(check, c) for check, c in caught if check != info.caught_by]
    if wrong:
        check, case = wrong[0]
        return False, f"caught, but by {check!r} instead of {info.caught_by!r} ({case['case']})"
    if info.rounds:
        labels = tuple(f"round {r}" for r in ("secret", "post-timing"))
        wanted = tuple(
            label for label, r in zip(labels, ("secret", "post"), strict=True) if r in info.rounds
        )
        off = [c for _, c in caught if not str(c.get("reason", "")).startswith(wanted)]
        if off:
            return False, f"caught in the wrong round: {off[0].get('reason', '')[:160]}"
    return True, f"caught by the {info.caught_by} check in {len(caught)}/{len(cases)} case(s)"


def run_sample(
    sample: Sample,
    backend_name: str,
    config: HarnessConfig,
    workloads: Sequence[Mapping[str, Any]] | None = None,
) -> SampleReport:
    job = JobSpec(
        job_id=SAMPLE_JOB_ID,
        nonce=SAMPLE_NONCE,
        solution=sample.solution,
        definition=sample.definition,
        workloads=list(workloads if workloads is not None else sample.workloads),
    )
    try:
        result = run_job(job, backend_name, config)
    except (HarnessError, SolutionError) as exc:
        return SampleReport(sample.name, False, f"the agent failed: {exc}")
    by_uuid = {w["uuid"]: w for w in job.workloads}
    rows = []
    for case in result["cases"]:
        latency = case.get("latencyNs")
        rows.append(
            CaseRow(
                sample=sample.name,
                case=case["case"],
                axes=_axes_text(by_uuid[case["case"]]),
                status=case["status"],
                median_ns=latency["median"] if latency else None,
                ci95_ns=(latency["ci95"][0], latency["ci95"][1]) if latency else None,
                samples=case.get("samples"),
                note=_short_reason(case),
            )
        )
    ok, verdict = judge(sample.info, result)
    return SampleReport(sample.name, ok, verdict, rows, result)


def _short_reason(case: Mapping[str, Any]) -> str:
    if case["status"] == "passed":
        return ""
    reason = str(case.get("reason", ""))
    return reason if len(reason) <= 110 else reason[:107] + "..."


def sign_and_verify(result: dict[str, Any], run_name: str) -> str:
    """Sign ``result`` as an agent's rerun/v1 envelope and verify it; returns the key id."""
    key = SigningKey.generate()
    run_digest = digest_of({"selfcheck": run_name})
    envelope = rerun_envelope(run_digest, run_name, key, result=result)
    parsed = parse_envelope(json.loads(json.dumps(envelope)))
    return verify_envelope(parsed, lambda key_id: key.public if key_id == key.key_id else None)


def crosscheck(
    sample: Sample,
    rows: list[CaseRow],
    backend_name: str,
    options: Mapping[str, str],
    workloads: Sequence[Mapping[str, Any]],
) -> None:
    """Time every passed case of ``sample`` independently; fills ``independent_ns``."""
    definition = parse_definition(sample.definition)
    solution = parse_solution(sample.solution)
    parsed = {w["uuid"]: parse_workload(w, definition) for w in workloads}
    backend = create_backend(backend_name, options)
    try:
        kernel = backend.compile(dict(solution.sources), solution.entry_point)
        for row in rows:
            if row.status != "passed":
                continue
            workload = parsed[row.case]
            axes = definition.resolve_axes(workload.axes)
            launch = resolve_launch(solution.launch, axes)
            values = inputs.generate(
                definition, workload, inputs.public_seed(SAMPLE_JOB_ID, workload.uuid, 0)
            )
            args = _arguments(backend, definition, workload, launch.args, values)
            backend.launch(kernel, launch.grid, launch.block, launch.shared_mem_bytes, args)
            method, times = independent.independent_latencies_ns(
                backend, kernel, launch, args, CROSSCHECK_SAMPLES
            )
            row.independent_ns = statistics.median(times)
            row.method = method
            del args
    finally:
        backend.close()


def _arguments(
    backend: Backend,
    definition: Any,
    workload: Any,
    launch_args: Sequence[tuple[str, Any]],
    values: Mapping[str, Any],
) -> list[KernelArg]:
    device_inputs = {n: backend.upload(v) for n, v in values.items() if isinstance(v, np.ndarray)}
    device_outputs = {}
    for name, (shape, dtype) in inputs.output_shapes(definition, workload).items():
        buffer = backend.empty(shape, dtype)
        backend.fill(buffer, checks.poison_pattern(dtype))
        device_outputs[name] = buffer
    args: list[KernelArg] = []
    for kind, value in launch_args:
        if kind == "scalar":
            args.append(value)
        elif kind == "output":
            args.append(device_outputs[value])
        elif value in device_inputs:
            args.append(device_inputs[value])
        else:
            args.append(values[value])
    return args


def _ns(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f}us" if value >= 1000 else f"{value:.0f}ns"


def format_table(reports: Sequence[SampleReport], ratio_tolerance: float) -> str:
    header = (
        f"{'sample':<24} {'case':<18} {'status':<16} {'median':>10} {'CI95':>21} "
        f"{'n':>5} {'indep.':>10} {'ratio':>7}  note"
    )
    lines = [header, "-" * len(header)]
    for report in reports:
        for row in report.rows:
            ci = f"[{_ns(row.ci95_ns[0])}, {_ns(row.ci95_ns[1])}]" if row.ci95_ns else "-"
            ratio = row.ratio
            ratio_text = "-" if ratio is None else f"{ratio:.3f}"
            if ratio is not None and abs(ratio - 1) > ratio_tolerance:
                ratio_text += "!"
            lines.append(
                f"{row.sample:<24} {row.axes:<18} {row.status:<16} {_ns(row.median_ns):>10} "
                f"{ci:>21} {row.samples or '-':>5} {_ns(row.independent_ns):>10} "
                f"{ratio_text:>7}  {row.note}"
            )
    lines.append("")
    for report in reports:
        lines.append(f"{'PASS' if report.ok else 'FAIL'}  {report.name}: {report.verdict}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gpu_agent.selfcheck", description=__doc__)
    parser.add_argument("--backend", default=GPU_BACKEND, help="backend name (default: GPU)")
    parser.add_argument("--samples", default="", help="comma-separated sample names (all)")
    parser.add_argument("--ratio-tolerance", type=float, default=DEFAULT_RATIO_TOLERANCE)
    parser.add_argument("--deadline-s", type=float, default=DEFAULT_DEADLINE_S)
    parser.add_argument("--quick", action="store_true", help="few samples (CI on CPU)")
    parser.add_argument(
        "--max-axis",
        type=int,
        default=0,
        help="clamp every workload axis to at most this (CI on CPU); 0: as written",
    )
    parser.add_argument(
        "--cases", type=int, default=0, help="run only the first N cases per sample; 0: all"
    )
    parser.add_argument("--json", type=Path, help="also write the reports here")
    parser.add_argument("--no-sign", action="store_true", help="skip signing the results")
    return parser


def _selected_workloads(sample: Sample, cases: int, max_axis: int) -> list[dict[str, Any]]:
    """The sample's first ``cases`` workloads (all if 0), axes clamped to ``max_axis`` (if > 0)."""
    workloads = sample.workloads[:cases] if cases > 0 else sample.workloads
    if max_axis > 0:
        workloads = [
            {**w, "axes": {k: min(int(v), max_axis) for k, v in w["axes"].items()}}
            for w in workloads
        ]
    return workloads


def _check_independent_timing(
    report: SampleReport,
    sample: Sample,
    backend_name: str,
    options: Mapping[str, str],
    workloads: Sequence[Mapping[str, Any]],
    ratio_tolerance: float,
) -> None:
    """Cross-check an honest sample's medians against an independent timing, in ``report``."""
    try:
        crosscheck(sample, report.rows, backend_name, options, workloads)
    except Exception as exc:
        report.ok = False
        report.verdict += f"; independent timing failed: {type(exc).__name__}: {exc}"
    methods = sorted({r.method for r in report.rows if r.method})
    if methods:
        report.verdict += f"; independent timing: {', '.join(methods)}"
    bad = [r for r in report.rows if r.ratio is not None and abs(r.ratio - 1) > ratio_tolerance]
    if bad:
        report.ok = False
        report.verdict += (
            f"; {len(bad)} case(s) differ from the independent timing by more than "
            f"{ratio_tolerance:.0%}"
        )
    if any(r.status == "passed" and r.independent_ns is None for r in report.rows):
        report.ok = False
        report.verdict += "; some cases were not timed independently"


def _write_json(path: Path, reports: Sequence[SampleReport]) -> None:
    path.write_text(
        json.dumps(
            [
                {
                    "sample": r.name,
                    "ok": r.ok,
                    "verdict": r.verdict,
                    "rows": [{**vars(row), "ratio": row.ratio} for row in r.rows],
                    "result": r.result,
                }
                for r in reports
            ],
            indent=2,
            default=lambda o: None if isinstance(o, float) and math.isnan(o) else str(o),
        ),
        "utf-8",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    names = [n for n in args.samples.split(",") if n] or sample_names()
    options = {"emulation_modules": EMULATIONS} if args.backend == CPU_TEST else {}
    config = HarnessConfig(
        stop=_stop_policy(args.quick),
        case_timeout_s=240.0,
        backend_options=options,
        bootstrap_resamples=500 if args.quick else stats.DEFAULT_RESAMPLES,
    )
    measuring = args.backend != CPU_TEST  # the real GPU backend, whose results count
    started = time.monotonic()
    reports: list[SampleReport] = []
    for name in names:
        if time.monotonic() - started > args.deadline_s:
            reports.append(SampleReport(name, False, f"skipped: deadline {args.deadline_s:g}s"))
            continue
        sample = load_sample(name)
        workloads = _selected_workloads(sample, args.cases, args.max_axis)
        print(f"[{time.monotonic() - started:6.1f}s] {name}: {len(workloads)} case(s)", flush=True)
        report = run_sample(sample, args.backend, config, workloads)
        if report.result is not None and not args.no_sign:
            try:
                sign_and_verify(report.result, f"selfcheck/{name}")
            except Exception as exc:
                report.ok = False
                report.verdict += f"; signing the rerun/v1 envelope failed: {exc}"
        if measuring and sample.info.honest and report.ok:
            _check_independent_timing(
                report, sample, args.backend, options, workloads, args.ratio_tolerance
            )
        reports.append(report)

    print()
    print(format_table(reports, args.ratio_tolerance))
    elapsed = time.monotonic() - started
    failed = [r.name for r in reports if not r.ok]
    print(
        f"\n{len(reports) - len(failed)}/{len(reports)} samples as expected on backend "
        f"{args.backend!r} in {elapsed:.0f}s" + (f"; FAILED: {', '.join(failed)}" if failed else "")
    )
    if args.json:
        _write_json(args.json, reports)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
