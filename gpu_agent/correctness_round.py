"""One correctness round of a case, on the device, and the trusted reference it checks against.

A round: fresh inputs from the round's seed, the reference's expected outputs, inputs on the
device and freshly poisoned outputs, one launch, then every check — no input changed (sha256
of the device copy), every output element written, outputs within the case's tolerance.
The checks themselves are ``gpu_agent/checks.py``; which rounds run is
``gpu_agent/inputs.py``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpu_agent import checks, inputs
from gpu_agent.backends.base import Backend, Buffer, CompiledKernel, KernelArg
from gpu_agent.case_task import AgentFault, CaseTask, ReferenceFn
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
    if function is None:
        raise AgentFault(f"no trusted reference for definition {definition_name!r}")
    return function  # type: ignore[no-any-return]


def buffer_writer(backend: Backend) -> Callable[[Buffer, npt.NDArray[np.generic]], None] | None:
    """The backend's optional ``write(buffer, host)`` (copy into an existing buffer).

    With it, every round of a case reuses the same device buffers with fresh contents, and
    the post-timing round refills the very buffers that were timed: a kernel that caches its
    result keyed on the pointers it was given then returns a stale answer, deterministically.
    Without it each round uploads to new buffers (where the allocator may or may not hand
    out the same addresses again).
    """
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
