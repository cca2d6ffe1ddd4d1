"""One correctness round of a case, on the device, and the trusted reference it checks against.

A round: fresh inputs from the round's seed, the reference's expected outputs, inputs on the
device and freshly poisoned outputs, one launch, then every check — no input changed (sha256
of the device copy), every output element written, outputs within the case's tolerance.
The checks themselves are ``gpu_agent/checks.py``; which rounds run is
``gpu_agent/inputs.py``.

Timed launches (:func:`timing_plan`) start from what a checked launch starts from: the last
round's buffers, outputs re-poisoned and inputs replaced by one of :data:`TIMING_VARIANTS`
fresh variants (nonce-seeded, uploaded once) before every launch (``TimingRefill``). When
cheap, the output of the last timed launch is checked against the reference of the variant
its inputs still hold (:func:`last_timed_launch_failures`). Every seed here comes from
:func:`case_seeds`, which the agent calls: the case child never holds the nonce.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpu_agent import checks, inputs
from gpu_agent.backends.base import Backend, Buffer, CompiledKernel, KernelArg
from gpu_agent.backends.timing_refill import TimingRefill
from gpu_agent.case_task import AgentFault, CaseSeeds, CaseTask, ReferenceFn
from gpu_agent.checks import Tolerance
from gpu_agent.launch_spec import ResolvedLaunch

# Output name → (shape, dtype), as inputs.output_shapes gives them.
OutputShapes = Mapping[str, tuple[tuple[int, ...], np.dtype[np.generic]]]


@dataclass
class DeviceSet:
    inputs: dict[str, Buffer]
    outputs: dict[str, Buffer]


@dataclass
class RoundResult:
    failures: list[str]
    max_abs: float
    max_rel: float
    args: list[KernelArg]
    buffers: DeviceSet


def load_reference(module_name: str, definition_name: str) -> ReferenceFn:
    """``module_name.reference_for(definition_name)``; AgentFault when there is none."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentFault(f"reference module {module_name!r} cannot be imported: {exc}") from exc
    reference_for = getattr(module, "reference_for", None)
    if reference_for is None:
        raise AgentFault(f"{module_name} has no reference_for()")
    try:
        function = reference_for(definition_name)
    except (KeyError, LookupError) as exc:
        raise AgentFault(f"no trusted reference for definition {definition_name!r}") from exc
    if not callable(function):
        raise AgentFault(f"no trusted reference for definition {definition_name!r}")
    checked: ReferenceFn = function  # a callable, from the agent's own reference module
    return checked


def buffer_writer(backend: Backend) -> Callable[[Buffer, npt.NDArray[np.generic]], None] | None:
    """The backend's optional ``write(buffer, host)`` (copy into an existing buffer).

    With it, every round of a case reuses the same device buffers with fresh contents, and
    the post-timing round refills the very buffers that were timed: a kernel that caches its
    result keyed on the pointers it was given then returns a stale answer, deterministically.
    Without it each round uploads to new buffers (where the allocator may or may not hand
    out the same addresses again). A backend says it cannot with a false
    ``writes_in_place`` (the ``buffers=fresh`` cpu-test variant).
    """
    if not getattr(backend, "writes_in_place", True):
        return None
    write = getattr(backend, "write", None)
    return write if callable(write) else None


def correctness_round(
    backend: Backend,
    kernel: CompiledKernel,
    task: CaseTask,
    reference: ReferenceFn,
    round_: inputs.Round,
    reuse: DeviceSet | None = None,
) -> RoundResult:
    """One round: fresh inputs, freshly poisoned outputs, one launch, every check.

    ``reuse``: the previous round's buffers, refilled in place (see :func:`buffer_writer`)."""
    definition, workload = task.definition, task.workload
    values = inputs.generate(definition, workload, round_.seed)
    raw_expected = _call_reference(reference, values)
    shapes = inputs.output_shapes(definition, workload)
    expected = _expected_outputs(raw_expected, shapes)

    tensors = {n: v for n, v in values.items() if isinstance(v, np.ndarray)}
    before = {name: checks.digest(array) for name, array in tensors.items()}
    buffers = _stage_buffers(backend, tensors, shapes, reuse)
    args = _kernel_args(task.launch, buffers, values)
    launch = task.launch
    backend.launch(kernel, launch.grid, launch.block, launch.shared_mem_bytes, args)

    failures = _mutation_failures(backend, buffers, tensors, before)
    output_failures, max_abs, max_rel = _output_failures(
        backend, buffers, shapes, expected, workload.tolerance
    )
    failures.extend(output_failures)
    return RoundResult(failures, max_abs, max_rel, args, buffers)


def _call_reference(
    reference: ReferenceFn, values: Mapping[str, object]
) -> Mapping[str, npt.NDArray[np.generic]]:
    try:
        return reference(**values)
    except Exception as exc:
        raise AgentFault(f"the trusted reference failed: {type(exc).__name__}: {exc}") from exc


def _expected_outputs(
    raw_expected: Mapping[str, npt.NDArray[np.generic]], shapes: OutputShapes
) -> dict[str, npt.NDArray[np.generic]]:
    expected: dict[str, npt.NDArray[np.generic]] = {}
    for name, (shape, dtype) in shapes.items():
        if name not in raw_expected:
            raise AgentFault(f"the reference returned no {name!r}")
        # SOL's reference returns each output in its own dtype; compare against that.
        value = np.asarray(raw_expected[name]).astype(dtype)
        if value.shape != shape:
            raise AgentFault(f"reference {name!r} has shape {value.shape}, expected {shape}")
        expected[name] = value
    return expected


def _stage_buffers(
    backend: Backend,
    tensors: Mapping[str, npt.NDArray[np.generic]],
    shapes: OutputShapes,
    reuse: DeviceSet | None,
) -> DeviceSet:
    """The round's inputs on the device and its outputs poisoned, reusing buffers if it can."""
    write = buffer_writer(backend)
    if reuse is not None and write is not None:
        for name, array in tensors.items():
            write(reuse.inputs[name], array)
        buffers = DeviceSet(reuse.inputs, reuse.outputs)
    else:
        buffers = DeviceSet(
            {name: backend.upload(array) for name, array in tensors.items()},
            {name: backend.empty(shape, dtype) for name, (shape, dtype) in shapes.items()},
        )
    for name, (_, dtype) in shapes.items():
        backend.fill(buffers.outputs[name], checks.poison_pattern(dtype))
    return buffers


def _kernel_args(
    launch: ResolvedLaunch, buffers: DeviceSet, values: Mapping[str, object]
) -> list[KernelArg]:
    args: list[KernelArg] = []
    for kind, value in launch.args:
        if kind == "scalar":
            args.append(value)
        elif kind == "output":
            args.append(buffers.outputs[value])
        elif value in buffers.inputs:
            args.append(buffers.inputs[value])
        else:  # a definition scalar input (shape null): by value, in its declared dtype
            scalar = values[value]
            assert isinstance(scalar, np.generic)
            args.append(scalar)
    return args


def _mutation_failures(
    backend: Backend,
    buffers: DeviceSet,
    tensors: Mapping[str, npt.NDArray[np.generic]],
    before: dict[str, str],
) -> list[str]:
    after = {
        name: checks.digest(backend.download(buffers.inputs[name], array.shape, array.dtype))
        for name, array in tensors.items()
    }
    mutated = checks.mutated_inputs(before, after)
    if not mutated:
        return []
    return [
        f"input mutation: the kernel modified input(s) {', '.join(mutated)} "
        "(sha256 of the device copy changed across the launch)"
    ]


def _output_failures(
    backend: Backend,
    buffers: DeviceSet,
    shapes: OutputShapes,
    expected: Mapping[str, npt.NDArray[np.generic]],
    tolerance: Tolerance,
) -> tuple[list[str], float, float]:
    """``(failures, max abs error, max rel error)`` over every output."""
    failures: list[str] = []
    max_abs = max_rel = 0.0
    for name, (shape, dtype) in shapes.items():
        got = backend.download(buffers.outputs[name], shape, dtype)
        written = checks.check_written(got, expected[name], name=name)
        if not written.ok:
            failures.append(f"unwritten output: {written.reason}")
        result = checks.compare(got, expected[name], tolerance, name=name)
        max_abs = max(max_abs, result.max_abs_error)
        max_rel = max(max_rel, result.max_rel_error)
        if not result.ok and written.ok:  # unwritten poison is NaN: say it once, precisely
            failures.append(f"tolerance: {result.reason}")
    return failures, max_abs, max_rel


# --- timed launches: the refill, and the check of the last one -------------------------------

# Fresh input variants the timed launches rotate through: enough that no launch sees the
# inputs of the one before it, few enough to stage on the device next to the case's buffers.
TIMING_VARIANTS = 3
# Inputs plus outputs up to this size keep their variants on the host, so that the last
# timed launch can be checked (one more reference call and comparison); above it, the
# post-timing round alone checks the timed buffers (host references of large cases take
# seconds each).
LAST_LAUNCH_CHECK_BYTES = 64 * 1024 * 1024


def timing_variant_seed(nonce: str, case: str, index: int) -> int:
    """``sha256("kernelindex-rerun-v1|timing|{nonce}|{case}|{index}")``, like the round seeds
    (gpu_agent/inputs.py): unknown before the job existed."""
    text = f"{inputs.PROTOCOL}|timing|{nonce}|{case}|{index}"
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def case_seeds(job_id: str, nonce: str, case: str) -> CaseSeeds:
    """Every seed a declarative case runs on. Called by the agent, never in a case child:
    the child gets these, not the nonce (see gpu_agent/case_task.py)."""
    return CaseSeeds(
        pre_timing=tuple(inputs.correctness_rounds(job_id, nonce, case)),
        post_timing=inputs.post_timing_round(nonce, case),
        timing_variants=tuple(timing_variant_seed(nonce, case, i) for i in range(TIMING_VARIANTS)),
    )


Values = dict[str, npt.NDArray[np.generic] | np.generic]


@dataclass
class TimingPlan:
    """The refill handed to ``time_launches`` and, when the last launch is to be checked,
    each variant's host values and input digests."""

    refill: TimingRefill
    variants: list[Values] = field(default_factory=list)
    digests: list[dict[str, str]] = field(default_factory=list)


def timing_plan(backend: Backend, task: CaseTask, buffers: DeviceSet) -> TimingPlan:
    """Poison patterns for the round's outputs and fresh variants of its inputs."""
    definition, workload = task.definition, task.workload
    shapes = inputs.output_shapes(definition, workload)
    outputs = tuple(
        (buffers.outputs[name], checks.poison_pattern(dtype)) for name, (_, dtype) in shapes.items()
    )
    values = [inputs.generate(definition, workload, seed) for seed in task.seeds.timing_variants]
    staged = tuple(
        (buffer, tuple(backend.upload(_array(v[name])) for v in values))
        for name, buffer in buffers.inputs.items()
    )
    plan = TimingPlan(TimingRefill(outputs, staged))
    size = sum(b.nbytes for b in (*buffers.inputs.values(), *buffers.outputs.values()))
    if size <= LAST_LAUNCH_CHECK_BYTES:
        plan.variants = values
        plan.digests = [{n: checks.digest(_array(v[n])) for n in buffers.inputs} for v in values]
    return plan


def _array(value: npt.NDArray[np.generic] | np.generic) -> npt.NDArray[np.generic]:
    assert isinstance(value, np.ndarray)  # buffers hold the tensor inputs only
    return value


def last_timed_launch_failures(
    backend: Backend,
    task: CaseTask,
    reference: ReferenceFn,
    plan: TimingPlan,
    buffers: DeviceSet,
) -> list[str]:
    """What is wrong with the last timed launch's output (``[]`` if it is right or was not
    checked). Its inputs still hold the variant it ran on; they must be one of the variants
    unchanged (else the kernel wrote to them while timed)."""
    if not plan.variants:
        return []
    held = {
        name: checks.digest(backend.download(buffer, _shape(plan, name), _dtype(plan, name)))
        for name, buffer in buffers.inputs.items()
    }
    matching = [i for i, digests in enumerate(plan.digests) if digests == held]
    if not matching:
        return [
            "input mutation: after timing the inputs match none of the variants the timed "
            "launches were given (the kernel wrote to an input while timed)"
        ]
    values = plan.variants[matching[0]]
    shapes = inputs.output_shapes(task.definition, task.workload)
    expected = _expected_outputs(_call_reference(reference, values), shapes)
    failures, _, _ = _output_failures(backend, buffers, shapes, expected, task.workload.tolerance)
    return failures


def _shape(plan: TimingPlan, name: str) -> tuple[int, ...]:
    return tuple(_array(plan.variants[0][name]).shape)


def _dtype(plan: TimingPlan, name: str) -> np.dtype[np.generic]:
    return _array(plan.variants[0][name]).dtype
