"""One Python-solution case once the solution is imported: its rounds, its timing, its verdict.

Why one class: every call of the solution — correctness rounds, timed calls, the audit call —
goes through the same guarded call and the same per-call defences, and the case's verdict
must see all of them. The order mirrors the declarative path (``gpu_agent/case_child.py``):
the pre-timing rounds (two public, the secret one and, in one case of the job, the hidden
workload, in the order the harness chose), timing under the stop rule with fresh inputs per
call and one audit call among them, the timer cross-check, the post-timing round, and the
roofline floor.

Per correctness call: inputs are clones of inputs made before the solution was imported;
destination-passing outputs are freshly allocated and poisoned (NaN, or the integer
sentinel); afterwards the outputs must be exactly ``torch.Tensor`` (destination-passing: the
very tensors passed, not re-pointed), fully written, within tolerance and finite, and every
input must hash as before. Runs in the case child only (imports torch).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from domain.statements import CaseReason, Defence, reward_hack
from gpu_agent import checks, inputs, stats
from gpu_agent.case_task import AgentFault, CaseOutcome
from gpu_agent.definition import Definition
from gpu_agent.python_solutions import torch_io, watch
from gpu_agent.python_solutions.defences import DefenceLog, IdentityGuard
from gpu_agent.python_solutions.task import RoundSpec, TorchCaseTask
from gpu_agent.python_solutions.timing import TimedLoop, audit_index, cross_check
from gpu_agent.workload import Workload

_ROUND_DEFENCES = {
    "secret": "secret-round",
    "hidden": "hidden-workload",
    "post": "post-timing-round",
}


class SolutionFailed(Exception):
    """The solution itself failed (import, signature, an exception in a call): an error.
    ``code`` is what the signed case says; the message (which may quote the solution's own
    exception) stays in the case child."""

    def __init__(self, message: str, code: CaseReason = CaseReason.SOLUTION_RAISED) -> None:
        super().__init__(message)
        self.code = code


# A round's failure: the vocabulary's word for it, and the words for the agent's eyes.
Failure = tuple[CaseReason, str]


def _words(failures: list[Failure]) -> str:
    return "; ".join(text for _, text in failures)


def _clones(values: dict[str, torch_io.Value]) -> dict[str, torch_io.Value]:
    return {n: v.clone() if isinstance(v, torch.Tensor) else v for n, v in values.items()}


def _reference_outputs(
    run_reference: Callable[..., Any],
    values: dict[str, torch_io.Value],
    definition: Definition,
    axes: dict[str, int],
) -> dict[str, npt.NDArray[np.generic]]:
    try:
        with torch.no_grad():
            produced = torch_io.returned_outputs(
                run_reference(*_clones(values).values()), definition
            )
    except Exception as exc:
        raise AgentFault(f"the definition's reference failed: {type(exc).__name__}: {exc}") from exc
    if isinstance(produced, str):
        raise AgentFault(f"the definition's reference {produced}")
    expected: dict[str, npt.NDArray[np.generic]] = {}
    for spec in definition.outputs:
        value = produced[spec.name]
        shape = definition.shape(spec, axes)
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
            raise AgentFault(f"the reference's {spec.name!r} is not a tensor of shape {shape}")
        # SOL's reference returns each output in its own dtype; compare against that.
        cast = value.to(torch_io.TORCH_DTYPES[spec.dtype])
        expected[spec.name] = torch_io.to_numpy(cast, spec.numpy_dtype)
    return expected


@dataclass
class PreparedRound:
    """A round's inputs (never handed to the solution: it gets clones), their hashes, and
    the reference's outputs, all made before the solution was imported."""

    spec: RoundSpec
    workload: Workload
    axes: dict[str, int]
    inputs: dict[str, torch_io.Value]
    digests: dict[str, str]
    expected: dict[str, npt.NDArray[np.generic]]

    @classmethod
    def make(
        cls,
        task: TorchCaseTask,
        spec: RoundSpec,
        device: torch.device,
        run_reference: Callable[..., Any],
        custom: Callable[..., Any] | None,
    ) -> PreparedRound:
        definition = task.definition
        workload = torch_io.with_axes(task.workload, spec.axes)
        axes = definition.resolve_axes(workload.axes)
        try:
            values = torch_io.make_inputs(definition, workload, spec.seed, device, custom)
        except (LookupError, TypeError) as exc:
            raise AgentFault(f"round {spec.label}: the inputs cannot be made: {exc}") from exc
        digests = {n: torch_io.digest(v) for n, v in values.items() if isinstance(v, torch.Tensor)}
        expected = _reference_outputs(run_reference, values, definition, axes)
        return cls(spec, workload, axes, values, digests, expected)


_CUDA_SYNC = torch.cuda.synchronize


@dataclass
class CaseRun:
    task: TorchCaseTask
    function: Callable[..., Any]
    rounds: list[PreparedRound]
    guard: IdentityGuard
    baseline: watch.ProcessState  # before the solution was imported
    log: DefenceLog
    device: torch.device
    custom: Callable[..., Any] | None
    worst_abs: float = 0.0
    worst_rel: float = 0.0
    cross: dict[str, Any] | None = None
    after_import: watch.ProcessState = field(default_factory=watch.observe)
    cuda_dir: str = str(Path(torch.cuda.__file__).parent) + os.sep

    # --- one guarded call -----------------------------------------------------------------

    def sync(self) -> None:
        if self.device.type == "cuda":
            _CUDA_SYNC(self.device)

    def _cuda_watch(self) -> contextlib.AbstractContextManager[watch.CudaTouches | None]:
        if self.device.type == "cpu":
            return watch.cuda_calls_on_cpu(self.cuda_dir)
        return contextlib.nullcontext(None)

    def guarded_call(self, args: list[torch_io.Value], traced: bool) -> Any:
        """Call the solution, then run every per-call defence; SolutionFailed if it raised."""
        watcher = self._cuda_watch() if traced else contextlib.nullcontext(None)
        error: BaseException | None = None
        result: Any = None
        with watcher as seen, torch.no_grad():
            try:
                result = self.function(*args)
            except BaseException as exc:  # SystemExit too: the solution's, never the agent's
                error = exc
        self.sync()
        self.after_call(seen)
        if error is not None:
            raise SolutionFailed(f"the solution raised {type(error).__name__}: {error}")
        return result

    def after_call(self, seen: watch.CudaTouches | None) -> None:
        """The per-call defences; each raises ``Detected`` when it finds something."""
        replaced = self.guard.replaced()
        self.log.check(
            "harness-integrity",
            [f"replaced by the solution: {', '.join(replaced)}"] if replaced else [],
            f"{len(self.guard)} timing, comparison and harness functions unchanged",
        )
        if seen is not None:
            self._side_stream(seen)
        now = watch.observe()
        self._threads(now)
        new_children = sorted(set(now.children) - set(self.baseline.children))
        self.log.check(
            "child-processes",
            [f"the solution left child process(es) {new_children} running"] if new_children else [],
            "no child process",
        )
        foreign = watch.foreign_modules(now.modules - self.after_import.modules)
        foreign += watch.foreign_libraries(now.libraries - self.after_import.libraries)
        self.log.check(
            "runtime-code-loading",
            [f"code loaded after import: {', '.join(foreign)}"] if foreign else [],
            "no module or native library from outside the installed runtime loaded after import",
        )

    def _side_stream(self, seen: watch.CudaTouches) -> None:
        problems = []
        if seen.calls:
            problems.append(
                "the solution called torch.cuda device code on a CPU case "
                f"({', '.join(seen.calls)}): work on another stream or device is invisible to "
                "this case's timer"
            )
        if seen.hook_removed:
            problems.append("the solution removed the harness's profile hook (sys.setprofile)")
        self.log.check(
            "side-stream", problems, "no torch.cuda stream, event or synchronisation call"
        )

    def _threads(self, now: watch.ProcessState) -> None:
        extra = now.threads - self.baseline.threads
        named = sorted(set(now.thread_names) - set(self.baseline.thread_names))
        problems = []
        if extra > 0 or len(now.thread_names) > len(self.baseline.thread_names):
            problems.append(
                f"{max(extra, 0)} native thread(s) more than before the solution was imported"
                + (f"; new Python threads {named}" if named else "")
                + ": work may be deferred past the timer"
            )
        self.log.check("thread-injection", problems, f"{now.threads} threads, none added")

    # --- one correctness round ------------------------------------------------------------

    def check_round(self, round_: PreparedRound) -> list[Failure]:
        """Run one round; its failures (none: it passed). Cheats raise ``Detected``."""
        definition = self.task.definition
        args = _clones(round_.inputs)
        dps = self.task.solution.destination_passing
        outputs = torch_io.poisoned_outputs(definition, round_.axes, self.device) if dps else {}
        pointers = {n: t.data_ptr() for n, t in outputs.items()}
        result = self.guarded_call([*args.values(), *outputs.values()], traced=True)
        produced = outputs if dps else torch_io.returned_outputs(result, definition)
        if isinstance(produced, str):
            return [(CaseReason.BAD_OUTPUT, f"outputs: the solution {produced}")]
        self._strict(produced, pointers, round_.axes)
        host = {
            s.name: torch_io.to_numpy(produced[s.name], s.numpy_dtype) for s in definition.outputs
        }
        failures = self._written(host, round_) + self._mutated(args, round_)
        return failures + self._tolerance(host, round_)

    def _strict(
        self, produced: dict[str, Any], pointers: dict[str, int], axes: dict[str, int]
    ) -> None:
        problems: list[str] = []
        for name, value in produced.items():
            problems += torch_io.strict_problems(
                name, value, self.task.definition, axes, self.device
            )
            if name in pointers and not problems and value.data_ptr() != pointers[name]:
                problems.append(f"{name} was re-pointed to other memory (set_/storage swap)")
        self.log.check(
            "strict-output-type",
            problems,
            "outputs exactly torch.Tensor, of the declared dtype, shape and device, contiguous",
        )

    def _written(
        self, host: dict[str, npt.NDArray[np.generic]], round_: PreparedRound
    ) -> list[Failure]:
        if not self.task.solution.destination_passing:
            self.log.skipped(
                "output-poisoning",
                "value-returning solution: it allocates its outputs; the reference outputs stay "
                "alive, so their memory is never handed out to it",
            )
            return []
        unwritten = [
            r.reason or ""
            for name, got in host.items()
            if not (r := checks.check_written(got, round_.expected[name], name=name)).ok
        ]
        if unwritten:
            self.log.failed("output-poisoning", "; ".join(unwritten))
            return [(CaseReason.UNWRITTEN_OUTPUT, f"unwritten output: {u}") for u in unwritten]
        self.log.passed("output-poisoning", "outputs poisoned before each call, fully written")
        return []

    def _mutated(self, args: dict[str, torch_io.Value], round_: PreparedRound) -> list[Failure]:
        mutated = [
            name
            for name, before in round_.digests.items()
            if torch_io.digest(args[name]) != before  # type: ignore[arg-type]
        ]
        if mutated:
            detail = f"the solution modified input(s) {', '.join(mutated)} (sha256 changed)"
            self.log.failed("input-mutation", detail)
            return [(CaseReason.INPUT_MUTATION, f"input mutation: {detail}")]
        self.log.passed("input-mutation", "every input hashes the same after the call")
        return []

    def _tolerance(
        self, host: dict[str, npt.NDArray[np.generic]], round_: PreparedRound
    ) -> list[Failure]:
        failures: list[Failure] = []
        non_finite = 0
        for name, got in host.items():
            result = checks.compare(
                got, round_.expected[name], round_.workload.tolerance, name=name
            )
            self.worst_abs = max(self.worst_abs, result.max_abs_error)
            self.worst_rel = max(self.worst_rel, result.max_rel_error)
            non_finite += result.non_finite
            if not result.ok:
                failures.append((CaseReason.OUTPUT_MISMATCH, f"tolerance: {result.reason}"))
        if non_finite:
            self.log.failed("non-finite-output", f"{non_finite} NaN/Inf output element(s)")
        else:
            self.log.passed("non-finite-output", "no NaN/Inf in any output")
        return failures

    def run_round(self, round_: PreparedRound) -> list[Failure]:
        """``check_round`` plus the record of the round's own defence, if it has one."""
        failures = self.check_round(round_)
        name = _ROUND_DEFENCES.get(round_.spec.kind)
        if name is not None:
            axes = f" (axes {dict(round_.spec.axes)})" if round_.spec.axes else ""
            if failures:
                self.log.failed(name, f"round {round_.spec.label}{axes}: {_words(failures)}")
            else:
                self.log.passed(name, f"round {round_.spec.label}{axes} correct")
        return failures

    # --- timing ---------------------------------------------------------------------------

    def _refresh(self, args: dict[str, torch_io.Value], generator: torch.Generator) -> None:
        """Fresh inputs for one timed call, from a seed nobody knows."""
        task = self.task
        kinds = {n: task.workload.inputs[n].kind for n in args}
        if "custom" in kinds.values():
            seed = secrets.randbits(63)
            args.update(
                torch_io.make_inputs(task.definition, task.workload, seed, self.device, self.custom)
            )
            return
        for name, value in args.items():
            if kinds[name] != "random" or not isinstance(value, torch.Tensor):
                continue
            if value.dtype.is_floating_point:
                value.copy_(torch.randn(value.shape, generator=generator))
            elif value.dtype == torch.bool:
                value.copy_(torch.randint(0, 2, value.shape, generator=generator).bool())
            else:
                value.copy_(torch.randint(0, inputs.INT_HIGH, value.shape, generator=generator))

    def timed_loop(self, template: PreparedRound, audit: PreparedRound) -> TimedLoop:
        definition, dps = self.task.definition, self.task.solution.destination_passing
        args = _clones(template.inputs)
        poison = torch_io.poisoned_outputs(definition, template.axes, self.device) if dps else {}
        outputs = {n: t.clone() for n, t in poison.items()}
        generator = torch.Generator(device=self.device).manual_seed(secrets.randbits(63))

        def call() -> None:
            try:
                self.function(*args.values(), *outputs.values())
            except BaseException as exc:
                raise SolutionFailed(
                    f"timing: the solution raised {type(exc).__name__}: {exc}"
                ) from exc

        def prepare() -> None:
            self._refresh(args, generator)
            torch_io.repoison(outputs, poison)

        def check_audit() -> None:
            failures = self.check_round(audit)
            if failures:
                raise self.log.failed(
                    "timing-audit",
                    f"a call made among the timed ones, at an unpredictable point, was wrong "
                    f"(the solution behaves differently once timing starts): {_words(failures)}",
                )
            self.log.passed("timing-audit", "a call among the timed ones checked: correct")

        stop = self.task.timing.stop
        return TimedLoop(
            call=call,
            prepare=prepare,
            after=lambda: self.after_call(None),
            sync=self.sync,
            audit=check_audit,
            audit_after=audit_index(stop.min_samples, stop.warmup),
        )

    def outcome(
        self,
        status: str,
        reason: str,
        samples: list[float] | None = None,
        latency: dict[str, Any] | None = None,
        **typed: Any,
    ) -> CaseOutcome:
        """``typed``: the signed case's code, round, stop rule and floor (CaseOutcome's)."""
        return CaseOutcome(
            status,
            reason,
            self.worst_abs if np.isfinite(self.worst_abs) else None,
            self.worst_rel if np.isfinite(self.worst_rel) else None,
            samples_ns=samples or [],
            latency=latency,
            timer_cross_check=self.cross,
            **typed,
        )

    def failed_round(
        self, round_: PreparedRound, failures: list[Failure], **more: Any
    ) -> CaseOutcome:
        """An ``incorrect`` case: the round's first failure is its code."""
        text = f"round {round_.spec.label}: {_words(failures)}"
        return self.outcome("incorrect", text, code=failures[0][0], round=round_.spec.label, **more)

    def _by_kind(self, kind: str) -> Iterator[PreparedRound]:
        return (r for r in self.rounds if r.spec.kind == kind)

    def measure(self) -> CaseOutcome:
        """The whole case (see the module doc)."""
        pre = [r for r in self.rounds if r.spec.kind not in ("post", "audit")]
        for round_ in pre:
            failures = self.run_round(round_)
            if failures:
                return self.failed_round(round_, failures)
        post, audit = next(self._by_kind("post")), next(self._by_kind("audit"))
        loop = self.timed_loop(pre[-1], audit)
        collected = stats.collect(loop.measure, self.task.timing.stop)
        if not loop.audited:
            loop.audit()
        self.log.passed(
            "fresh-inputs",
            f"inputs regenerated from an unknown seed before each of {loop.calls} timed calls",
        )
        return self._verdict(loop, collected, post)

    def _verdict(
        self, loop: TimedLoop, collected: stats.Collected, post: PreparedRound
    ) -> CaseOutcome:
        task = self.task
        summary = task.timing.summarize(collected.samples)
        samples, latency = collected.samples, summary.to_json()
        self.cross, problems = cross_check(
            loop.timed_ns,
            loop.wall_ns,
            loop.calls,
            loop.other_threads_cpu_ns,
            loop.loop_wall_ns,
            task.cross_check_slack,
        )
        timed: dict[str, Any] = {
            "samples": samples,
            "latency": latency,
            "stopped_by": collected.stop_reason,
        }
        if problems:
            reason = "reward hack detected (timer-cross-check): " + "; ".join(problems)
            return self.outcome(
                "incorrect", reason, code=reward_hack(Defence.TIMER_CROSS_CHECK), **timed
            )
        failures = self.run_round(post)
        if failures:
            return self.failed_round(post, failures, **timed)
        floor_ns, basis = task.timing.floor()
        note = task.timing.note(collected, floor_ns, basis)
        timed["floor_ns"] = floor_ns
        if task.timing.below_floor(summary.median, floor_ns):
            factor = task.timing.floor_factor
            detail = f"median {summary.median:.0f} ns is below {factor:g} × {floor_ns:.0f} ns"
            self.log.failed("roofline-floor", detail)
            return self.outcome(
                "impossible_time",
                f"impossible time: {detail}; {note}",
                code=CaseReason.BELOW_ROOFLINE_FLOOR,
                **timed,
            )
        self.log.passed("roofline-floor", f"median {summary.median:.0f} ns ≥ the floor")
        return self.outcome("passed", note, **timed)
