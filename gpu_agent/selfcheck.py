"""Self-check of the rerun agent on a real device: every sample, end to end (docs/design.md §11).

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

* the refill sample (``adv_sub_floor``, "compute only when checked"): *neutralised* — the
  harness refills outputs (poison) and inputs (fresh variants) before every timed launch
  (``timing_refill.py``), so the kernel computes while timed: every case must pass with a
  median at least :data:`NEUTRALISED_RATIO` × an unrefilled timing of the same kernel (in
  which it sees no poison and idles) — on a GPU the independent timer, on ``cpu-test`` the
  backend's own ``time_launches`` without a refill. The cheat gains nothing; if the floor
  or any other check refused it instead, the refill did not reach the kernel: a failure.

Timings agree when ``|median − independent| ≤ max(3 %, absolute slack)``
(``gpu_agent/backends/timing_slack.py``: the measured event overhead plus the events'
resolution, 2 µs without a measurement), so µs kernels are not failed for the events' fixed
cost.

It fits one 10-minute call: ``--deadline-s`` bounds the whole run, each sample's cases get
the time left (at most :data:`CASE_TIMEOUT_S` each), the independent timing runs only with
:data:`CROSSCHECK_RESERVE_S` left, and samples past the deadline are reported as skipped.
The table is written incrementally — each case's row as soon as the harness has measured it
(``run_job(..., on_case=...)``), each sample's verdict (and its rows again once timed
independently) when it is done, to ``--table`` (default ``$OUT/selfcheck-table.txt`` when
``$OUT`` is set), the JSON reports to ``--json`` (default ``$OUT/selfcheck.json``) after each
sample — so a run cut short still leaves every row it measured.
It prints one table row per case and exits non-zero on any failure. ``--backend cpu-test``
runs the same logic on CPU with the samples' emulations (``gpu_agent/samples/emulations.py``;
no ratio check: CPU times say nothing about a GPU), which is how CI tests this script.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from domain.canonical import digest_of
from gpu_agent import checks, inputs, stats
from gpu_agent.backends import crosscheck as independent
from gpu_agent.backends.base import Backend, CompiledKernel, KernelArg
from gpu_agent.backends.registry import CPU_TEST, GPU_BACKEND, create_backend
from gpu_agent.backends.selfcheck_table import (
    CaseRow,
    ReportOutput,
    SampleReport,
    format_rows,
    format_table,
    write_json,
)
from gpu_agent.backends.timing_slack import absolute_slack_ns
from gpu_agent.definition import parse_definition
from gpu_agent.harness import HarnessConfig, HarnessError, JobSpec, run_job
from gpu_agent.launch_spec import ResolvedLaunch, resolve_launch
from gpu_agent.samples import SAMPLE_JOB_ID, SAMPLE_NONCE, Sample, load_sample, sample_names
from gpu_agent.samples.verdicts import NEUTRALISE_PENDING, check_neutralised, judge
from gpu_agent.sol_parsing import SolutionError
from gpu_agent.solution import parse_solution
from gpu_agent.workload import parse_workload
from ledger.signing.authoring import rerun_envelope
from ledger.signing.dsse import parse_envelope, verify_envelope
from ledger.signing.keys import SigningKey

DEFAULT_RATIO_TOLERANCE = 0.03
DEFAULT_DEADLINE_S = 420.0
CROSSCHECK_SAMPLES = 200
CPU_SAMPLES = 20  # the unrefilled timing on cpu-test (only the refill sample is timed so)
CASE_TIMEOUT_S = 240.0
MIN_CASE_TIMEOUT_S = 30.0
CROSSCHECK_RESERVE_S = 20.0
EMULATIONS = "gpu_agent.samples.emulations"


def _stop_policy(quick: bool) -> stats.StopPolicy:
    if quick:  # CI on CPU: enough samples for the statistics, not for precision
        return stats.StopPolicy(
            warmup=2, batch=20, min_samples=20, target_rse=0.05, max_samples=40, time_budget_s=2
        )
    # 100 ms warm-up (the default), then at most 2 s a case: 19 cases fit the deadline.
    return stats.StopPolicy(
        warmup=10, batch=50, min_samples=50, target_rse=0.005, max_samples=1000, time_budget_s=2
    )


def _axes_text(workload: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in workload["axes"].items())


def _row(sample: Sample, axes: str, case: Mapping[str, Any]) -> CaseRow:
    latency = case.get("latencyNs")
    return CaseRow(
        sample=sample.name,
        case=case["case"],
        axes=axes,
        status=case["status"],
        median_ns=latency["median"] if latency else None,
        ci95_ns=(latency["ci95"][0], latency["ci95"][1]) if latency else None,
        samples=case.get("samples"),
        note=_short_reason(case),
    )


def run_sample(
    sample: Sample,
    backend_name: str,
    config: HarnessConfig,
    workloads: Sequence[Mapping[str, Any]] | None = None,
    on_row: Callable[[CaseRow], None] | None = None,
) -> SampleReport:
    """Run the sample as a job; ``on_row`` is told each case's row as soon as it is measured."""
    job = JobSpec(
        job_id=SAMPLE_JOB_ID,
        nonce=SAMPLE_NONCE,
        solution=sample.solution,
        definition=sample.definition,
        workloads=list(workloads if workloads is not None else sample.workloads),
    )
    by_uuid = {w["uuid"]: w for w in job.workloads}
    rows: list[CaseRow] = []

    def measured(case: dict[str, Any]) -> None:
        rows.append(_row(sample, _axes_text(by_uuid[case["case"]]), case))
        if on_row is not None:
            on_row(rows[-1])

    try:
        result = run_job(job, backend_name, config, on_case=measured)
    except (HarnessError, SolutionError) as exc:
        return SampleReport(sample.name, False, f"the agent failed: {exc}", rows)
    ok, verdict = judge(sample.info, result)
    return SampleReport(sample.name, ok, verdict, rows, result)


def _short_reason(case: Mapping[str, Any]) -> str:
    if case["status"] == "passed":
        return ""
    reason = str(case.get("reason", ""))
    if case.get("round"):  # the rerun vocabulary's code, and the round it failed in
        reason = f"round {case['round']}: {reason}"
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
        calibrate = getattr(backend, "event_overhead_ns", None)
        overhead = float(calibrate()) if callable(calibrate) else None
        for row in rows:
            row.event_overhead_ns = overhead
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
            method, times = _independent_latencies(backend, kernel, launch, args)
            row.independent_ns = statistics.median(times)
            row.method = method
            del args
    finally:
        backend.close()


def _independent_latencies(
    backend: Backend, kernel: CompiledKernel, launch: ResolvedLaunch, args: list[KernelArg]
) -> tuple[str, list[float]]:
    """``(method, latencies)`` of the kernel timed apart from the harness, without a refill:
    on a GPU the independent timer; on ``cpu-test``, which has none, the backend's own loop
    (enough to tell a kernel that idles when unwatched from one that works)."""
    if backend.name == CPU_TEST:
        geometry = (launch.grid, launch.block, launch.shared_mem_bytes)
        return "cpu-test, no refill", backend.time_launches(kernel, *geometry, args, CPU_SAMPLES)
    return independent.independent_latencies_ns(backend, kernel, launch, args, CROSSCHECK_SAMPLES)


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
    parser.add_argument("--json", type=Path, help="write the reports here (default $OUT/...)")
    parser.add_argument("--table", type=Path, help="write the table here (default $OUT/...)")
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
    if not _time_independently(report, sample, backend_name, options, workloads):
        return
    bad = [r for r in report.rows if r.agrees(ratio_tolerance) is False]
    if bad:
        report.ok = False
        slack = absolute_slack_ns(bad[0].event_overhead_ns)
        report.verdict += (
            f"; {len(bad)} case(s) differ from the independent timing by more than "
            f"max({ratio_tolerance:.0%}, {slack / 1000:.2f} us)"
        )
    if any(r.status == "passed" and r.independent_ns is None for r in report.rows):
        report.ok = False
        report.verdict += "; some cases were not timed independently"


def _time_independently(
    report: SampleReport,
    sample: Sample,
    backend_name: str,
    options: Mapping[str, str],
    workloads: Sequence[Mapping[str, Any]],
) -> bool:
    try:
        crosscheck(sample, report.rows, backend_name, options, workloads)
    except Exception as exc:
        report.ok = False
        report.verdict += f"; independent timing failed: {type(exc).__name__}: {exc}"
        return False
    methods = sorted({r.method for r in report.rows if r.method})
    if methods:
        report.verdict += f"; independent timing: {', '.join(methods)}"
    overheads = {r.event_overhead_ns for r in report.rows if r.event_overhead_ns is not None}
    if overheads:
        report.verdict += f"; event overhead {min(overheads) / 1000:.2f} us (empty kernel)"
    return True


def _config(args: argparse.Namespace, options: Mapping[str, str], left_s: float) -> HarnessConfig:
    """The harness configuration for one sample, its cases bounded by the time left."""
    return HarnessConfig(
        stop=_stop_policy(args.quick),
        case_timeout_s=max(MIN_CASE_TIMEOUT_S, min(CASE_TIMEOUT_S, left_s)),
        backend_options=options,
        bootstrap_resamples=500 if args.quick else stats.DEFAULT_RESAMPLES,
    )


def _one_sample(
    name: str,
    args: argparse.Namespace,
    options: Mapping[str, str],
    deadline: float,
    output: IncrementalOutput | None = None,
) -> SampleReport:
    """Run, sign and time one sample independently (on a GPU; on ``cpu-test``, only the
    refill sample, unrefilled), within the deadline."""
    sample = load_sample(name)
    workloads = _selected_workloads(sample, args.cases, args.max_axis)
    config = _config(args, options, deadline - time.monotonic())
    on_row = None if output is None else output.case_done
    report = run_sample(sample, args.backend, config, workloads, on_row)
    if report.result is not None and not args.no_sign:
        try:
            sign_and_verify(report.result, f"selfcheck/{name}")
        except Exception as exc:
            report.ok = False
            report.verdict += f"; signing the rerun/v1 envelope failed: {exc}"
    neutralising = report.verdict == NEUTRALISE_PENDING
    measuring = args.backend != CPU_TEST  # the real GPU backend, whose times mean something
    if report.result is None or not (measuring or neutralising):
        return report
    if deadline - time.monotonic() < CROSSCHECK_RESERVE_S:
        report.ok = report.ok and not sample.info.honest
        report.verdict += "; no time left for the independent timing"
    elif neutralising:
        if _time_independently(report, sample, args.backend, options, workloads):
            check_neutralised(report)
    elif sample.info.honest and report.ok:
        _check_independent_timing(
            report, sample, args.backend, options, workloads, args.ratio_tolerance
        )
    return report


class IncrementalOutput(ReportOutput):
    """:class:`ReportOutput` that writes each case's row as soon as it is measured; at the
    end of a sample only its verdict, and the rows again that were timed independently."""

    def __init__(self, table: Path | None, reports: Path | None, ratio_tolerance: float) -> None:
        super().__init__(table, reports)
        self.ratio_tolerance = ratio_tolerance

    def _emit(self, lines: Sequence[str]) -> None:
        print("\n".join(lines), flush=True)
        if self.table is not None:
            with self.table.open("a", encoding="utf-8") as handle:
                handle.write("".join(f"{line}\n" for line in lines))

    def case_done(self, row: CaseRow) -> None:
        self._emit(format_rows([row], self.ratio_tolerance))

    def sample_done(self, reports: Sequence[SampleReport], ratio_tolerance: float) -> None:
        report = reports[-1]
        timed = [r for r in report.rows if r.independent_ns is not None]
        verdict = f"{'PASS' if report.ok else 'FAIL'}  {report.name}: {report.verdict}"
        self._emit([*format_rows(timed, ratio_tolerance), verdict])
        if self.reports is not None:
            write_json(self.reports, reports)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    names = [n for n in args.samples.split(",") if n] or sample_names()
    options = {"emulation_modules": EMULATIONS} if args.backend == CPU_TEST else {}
    started = time.monotonic()
    deadline = started + args.deadline_s
    output = IncrementalOutput(args.table, args.json, args.ratio_tolerance)
    reports: list[SampleReport] = []
    for name in names:
        if time.monotonic() > deadline:
            reports.append(SampleReport(name, False, f"skipped: deadline {args.deadline_s:g}s"))
        else:
            print(f"[{time.monotonic() - started:6.1f}s] {name}", flush=True)
            reports.append(_one_sample(name, args, options, deadline, output))
        output.sample_done(reports, args.ratio_tolerance)

    print()
    print(format_table(reports, args.ratio_tolerance))
    elapsed = time.monotonic() - started
    failed = [r.name for r in reports if not r.ok]
    print(
        f"\n{len(reports) - len(failed)}/{len(reports)} samples as expected on backend "
        f"{args.backend!r} in {elapsed:.0f}s" + (f"; FAILED: {', '.join(failed)}" if failed else "")
    )
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
