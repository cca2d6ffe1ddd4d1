"""Tensors in and out of a Python solution: inputs, poisoned outputs, exact host copies.

Why: the Python path must feed a solution the *same* inputs the declarative path would (the
numpy generator of ``gpu_agent/inputs.py``, bit for bit), or those the definition's own
``custom_inputs_entrypoint`` makes, and read outputs back without trusting anything the
solution could have bent: host copies go through raw bytes (a same-width integer view), so
no dtype conversion of the solution's choosing is involved; outputs must be exactly
``torch.Tensor`` (no subclass, hence no ``__torch_function__`` tricks) of the declared dtype,
shape and device, and contiguous. Runs in the case child only (imports torch).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from gpu_agent import checks, inputs
from gpu_agent.definition import Definition
from gpu_agent.workload import Workload

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "uint32": torch.uint32,
    "uint64": torch.uint64,
    "bool": torch.bool,
}
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_NP_BITS = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}

Value = torch.Tensor | int | float | bool
ReferenceRun = Callable[..., Any]


def to_torch(
    array: npt.NDArray[np.generic], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """The array as a tensor of ``dtype``, bit for bit (through a same-width integer view)."""
    contiguous = np.ascontiguousarray(array)
    width = contiguous.dtype.itemsize
    raw = torch.from_numpy(contiguous.view(_NP_BITS[width]).copy())
    return raw.view(dtype).to(device)


def to_numpy(tensor: torch.Tensor, dtype: np.dtype[np.generic]) -> npt.NDArray[np.generic]:
    """A host copy of ``tensor`` as ``dtype``, bit for bit."""
    host = tensor.detach().to("cpu").contiguous()
    bits = host.view(_BITS[host.element_size()]).numpy().copy()
    return bits.view(dtype).reshape(tuple(host.shape))


def digest(tensor: torch.Tensor) -> str:
    host = tensor.detach().to("cpu").contiguous()
    return hashlib.sha256(host.view(torch.uint8).numpy().tobytes()).hexdigest()


def _scalar(value: np.generic) -> int | float | bool:
    item = value.item()
    assert isinstance(item, (int, float, bool))
    return item


def make_inputs(
    definition: Definition,
    workload: Workload,
    seed: int,
    device: torch.device,
    custom: Callable[..., Mapping[str, Any]] | None,
) -> dict[str, Value]:
    """One round's inputs, in the definition's order: numpy-generated ones from ``seed``,
    ``custom`` ones from the definition's generator with torch seeded from ``seed``."""
    generated = inputs.generate(definition, workload, seed, skip_custom=True)
    made: dict[str, Value] = {}
    for name, value in generated.items():
        spec = definition.tensor(name)
        if isinstance(value, np.ndarray) and spec.shape is not None:
            made[name] = to_torch(value, TORCH_DTYPES[spec.dtype], device)
        else:
            made[name] = _scalar(value)  # type: ignore[arg-type]
    wanted = [s.name for s in definition.inputs if workload.inputs[s.name].kind == "custom"]
    if wanted:
        made |= _custom_inputs(definition, workload, seed, device, custom, wanted, made)
    return {s.name: made[s.name] for s in definition.inputs}


def _custom_inputs(
    definition: Definition,
    workload: Workload,
    seed: int,
    device: torch.device,
    custom: Callable[..., Mapping[str, Any]] | None,
    wanted: list[str],
    made: Mapping[str, Value],
) -> dict[str, Value]:
    if custom is None:
        raise LookupError(
            f"inputs {wanted} are custom but the reference defines no "
            f"{definition.custom_inputs_entrypoint!r}"
        )
    axes = definition.resolve_axes(workload.axes)
    scalars = {k: v for k, v in made.items() if not isinstance(v, torch.Tensor)}
    torch.manual_seed(seed)
    produced = custom({**axes, **scalars}, device)
    return {name: _checked_custom(definition, axes, name, produced.get(name)) for name in wanted}


def _checked_custom(
    definition: Definition, axes: Mapping[str, int], name: str, value: Any
) -> Value:
    spec = definition.tensor(name)
    if spec.shape is None:
        if not isinstance(value, (int, float, bool)):
            raise TypeError(f"custom input {name!r} must be a number, got {type(value).__name__}")
        return value
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"custom input {name!r} must be a tensor, got {type(value).__name__}")
    shape = definition.shape(spec, axes)
    if tuple(value.shape) != shape or value.dtype != TORCH_DTYPES[spec.dtype]:
        raise TypeError(f"custom input {name!r} is {tuple(value.shape)}/{value.dtype}, not {shape}")
    return value.contiguous()


def poisoned_outputs(
    definition: Definition, axes: Mapping[str, int], device: torch.device
) -> dict[str, torch.Tensor]:
    """Every output, allocated and filled with the poison of its dtype (NaN for floats)."""
    outputs: dict[str, torch.Tensor] = {}
    for spec in definition.outputs:
        shape = definition.shape(spec, axes)
        outputs[spec.name] = to_torch(
            checks.poisoned(shape, spec.numpy_dtype), TORCH_DTYPES[spec.dtype], device
        )
    return outputs


def repoison(outputs: Mapping[str, torch.Tensor], poison: Mapping[str, torch.Tensor]) -> None:
    for name, tensor in outputs.items():
        tensor.copy_(poison[name])


def with_axes(workload: Workload, axes: Mapping[str, int] | None) -> Workload:
    return workload if axes is None else dataclasses.replace(workload, axes=dict(axes))


def strict_problems(
    name: str, value: Any, definition: Definition, axes: Mapping[str, int], device: torch.device
) -> list[str]:
    """Why ``value`` is not exactly the declared output ``name`` (empty: it is)."""
    if type(value) is not torch.Tensor:
        kind = f"{type(value).__module__}.{type(value).__qualname__}"
        return [
            f"{name} is a {kind}, not exactly torch.Tensor (a subclass or proxy can be "
            "lazy or fake its values)"
        ]
    spec = definition.tensor(name)
    problems: list[str] = []
    shape = definition.shape(spec, axes)
    if value.dtype != TORCH_DTYPES[spec.dtype]:
        problems.append(f"{name} has dtype {value.dtype}, declared {spec.dtype}")
    if tuple(value.shape) != shape:
        problems.append(f"{name} has shape {tuple(value.shape)}, declared {shape}")
    if value.device != device:
        problems.append(f"{name} is on {value.device}, the case runs on {device}")
    if not value.is_contiguous():
        problems.append(f"{name} is not contiguous")
    return problems


def returned_outputs(result: Any, definition: Definition) -> dict[str, Any] | str:
    """A value-returning solution's outputs by name (a tensor, a tuple/list in the
    definition's order, or a dict by name), or why the result has the wrong form."""
    names = [s.name for s in definition.outputs]
    if isinstance(result, Mapping):
        missing = [n for n in names if n not in result]
        if missing:
            return f"the returned dict lacks output(s) {missing}"
        return {n: result[n] for n in names}
    if isinstance(result, (tuple, list)):
        if len(result) != len(names):
            return f"returned {len(result)} values for {len(names)} output(s)"
        return dict(zip(names, result, strict=True))
    if len(names) == 1:
        return {names[0]: result}
    return f"returned a {type(result).__name__} for {len(names)} outputs"
