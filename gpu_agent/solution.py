"""SOL-ExecBench Solution, Definition and Workload documents, as the agent runs them.

Formats: fixtures/sol-execbench/docs/{solution,definition,workload}.md. The agent runs one
kind of solution only — ``spec.binding`` equal to ``SOLUTION_BINDING``, ``spec.languages ==
["cuda_cpp"]``, ``spec.entry_point == "<file>.cu::<extern "C" kernel>"`` — plus a declarative
``spec.launch`` that KernelIndex adds to the SOL format::

    "launch": {
      "grid": ["ceil_div(batch_size, 4)"],          # 1–3 integer expressions
      "block": [256],                               # 1–3, ≤ 1024 threads in total
      "sharedMemBytes": "0",                        # optional, default 0
      "args": [{"input": "hidden_states"}, {"input": "weight"}, {"output": "output"},
               {"scalar": "int32", "value": "batch_size"}]
    }

Everything else is refused with :class:`UnsupportedSolution`: the SOL default ``torch``
binding (and every Python language) needs the submitter's host C++ or Python to run inside
the agent, and the agent never runs submitted host code — only a kernel it compiled itself,
launched with arguments it chose, so that it can poison, hash and time around it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import numpy as np

from gpu_agent import expressions
from gpu_agent.backends.registry import SOLUTION_BINDING
from gpu_agent.checks import DTYPES, Tolerance
from gpu_agent.expressions import LaunchSpecError

MAX_SOURCES = 64
MAX_SOURCE_BYTES = 4 * 1024 * 1024
MAX_LAUNCH_ARGS = 64
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_SOURCE_PATH = re.compile(r"^[A-Za-z0-9_.\-/]{1,200}$")

ScalarType = Literal["int32", "int64", "uint32", "uint64", "float32", "float64"]
SCALAR_TYPES: dict[str, np.dtype[np.generic]] = {
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}


class SolutionError(ValueError):
    """A solution, definition or workload document is malformed or inconsistent."""


class UnsupportedSolution(SolutionError):
    """A well-formed solution of a kind the agent refuses to run (the message says why)."""


# --- definition -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[str, ...] | None  # None: a scalar passed by value (SOL "shape": null)
    dtype: str

    @property
    def numpy_dtype(self) -> np.dtype[np.generic]:
        return DTYPES[self.dtype]


@dataclass(frozen=True)
class Axis:
    kind: Literal["const", "var", "expr"]
    value: int | None = None
    expression: str | None = None


@dataclass(frozen=True)
class Definition:
    name: str
    axes: Mapping[str, Axis]
    inputs: tuple[TensorSpec, ...]  # in document order: the SOL argument order
    outputs: tuple[TensorSpec, ...]
    constraints: tuple[str, ...] = ()
    tolerance: Mapping[str, Any] = field(default_factory=dict)

    def tensor(self, name: str) -> TensorSpec:
        for spec in (*self.inputs, *self.outputs):
            if spec.name == name:
                return spec
        raise KeyError(name)

    def resolve_axes(self, given: Mapping[str, int]) -> dict[str, int]:
        """All axis values for one workload: consts, the workload's vars, then exprs."""
        for name in given:
            if name not in self.axes:
                raise SolutionError(f"workload axis {name!r} is not an axis of {self.name}")
        values: dict[str, int] = {}
        for name, axis in self.axes.items():
            if axis.kind == "const":
                assert axis.value is not None
                if name in given and given[name] != axis.value:
                    raise SolutionError(
                        f"workload sets const axis {name!r} to {given[name]}, "
                        f"the definition fixes {axis.value}"
                    )
                values[name] = axis.value
            elif axis.kind == "var":
                if name not in given:
                    raise SolutionError(f"workload gives no value for var axis {name!r}")
                values[name] = given[name]
        pending = {n: a.expression for n, a in self.axes.items() if a.kind == "expr"}
        # Exprs may refer to each other: resolve in passes; no progress means a cycle.
        while pending:
            progressed = False
            for name, text in list(pending.items()):
                assert text is not None
                try:
                    values[name] = expressions.evaluate(text, values, extended=True)
                except LaunchSpecError as exc:
                    if "unknown name" in str(exc) and any(
                        other in pending and other != name for other in _names_in(text)
                    ):
                        continue
                    raise SolutionError(f"axis {name!r}: {exc}") from None
                del pending[name]
                progressed = True
            if not progressed:
                raise SolutionError(f"axis expressions refer to each other: {sorted(pending)}")
        for constraint in self.constraints:
            _check_constraint(constraint, values)
        return values

    def shape(self, spec: TensorSpec, axes: Mapping[str, int]) -> tuple[int, ...]:
        if spec.shape is None:
            return ()
        return tuple(axes[name] for name in spec.shape)


def _names_in(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


_COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")


def _check_constraint(text: str, values: Mapping[str, int]) -> None:
    for op in _COMPARISONS:
        if op in text:
            left_text, right_text = text.split(op, 1)
            try:
                left = expressions.evaluate(left_text, values, extended=True)
                right = expressions.evaluate(right_text, values, extended=True)
            except LaunchSpecError as exc:
                raise SolutionError(f"constraint {text!r}: {exc}") from None
            holds = {
                "==": left == right,
                "!=": left != right,
                "<=": left <= right,
                ">=": left >= right,
                "<": left < right,
                ">": left > right,
            }[op]
            if not holds:
                raise SolutionError(f"constraint {text!r} does not hold ({left} {op} {right})")
            return
    raise SolutionError(f"constraint {text!r} has no comparison operator")


def _require(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise SolutionError(f"{where}: missing {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise SolutionError(f"{where}.{key}: wrong type {type(value).__name__}")
    return value


def _tensor_specs(obj: object, where: str) -> tuple[TensorSpec, ...]:
    if not isinstance(obj, dict):
        raise SolutionError(f"{where} must be an object")
    specs = []
    for name, spec in obj.items():
        if not isinstance(spec, dict) or not _IDENTIFIER.match(name):
            raise SolutionError(f"{where}.{name}: must be an object named by an identifier")
        shape = spec.get("shape")
        if shape is not None and (
            not isinstance(shape, list) or not all(isinstance(s, str) for s in shape)
        ):
            raise SolutionError(f"{where}.{name}.shape must be a list of axis names or null")
        dtype = _require(spec, "dtype", str, f"{where}.{name}")
        if dtype not in DTYPES:
            raise UnsupportedSolution(
                f"{where}.{name}: dtype {dtype!r} is not supported by the agent "
                f"(supported: {', '.join(DTYPES)})"
            )
        specs.append(TensorSpec(name, None if shape is None else tuple(shape), dtype))
    return tuple(specs)


def parse_definition(obj: object) -> Definition:
    if not isinstance(obj, dict):
        raise SolutionError("definition must be a JSON object")
    name = _require(obj, "name", str, "definition")
    raw_axes = _require(obj, "axes", dict, "definition")
    axes: dict[str, Axis] = {}
    for axis_name, axis in raw_axes.items():
        where = f"definition.axes.{axis_name}"
        if not isinstance(axis, dict) or not _IDENTIFIER.match(axis_name):
            raise SolutionError(f"{where}: must be an object named by an identifier")
        kind = axis.get("type")
        if kind == "const":
            value = _require(axis, "value", int, where)
            axes[axis_name] = Axis("const", value=value)
        elif kind == "var":
            axes[axis_name] = Axis("var")
        elif kind == "expr":
            axes[axis_name] = Axis("expr", expression=_require(axis, "expression", str, where))
        else:
            raise SolutionError(f"{where}.type must be const, var or expr, got {kind!r}")
    inputs = _tensor_specs(_require(obj, "inputs", dict, "definition"), "definition.inputs")
    outputs = _tensor_specs(_require(obj, "outputs", dict, "definition"), "definition.outputs")
    for spec in (*inputs, *outputs):
        for axis_name in spec.shape or ():
            if axis_name not in axes:
                raise SolutionError(f"tensor {spec.name!r} uses unknown axis {axis_name!r}")
    for spec in outputs:
        if spec.shape is None:
            raise SolutionError(f"output {spec.name!r} must be a tensor (shape null is a scalar)")
    names = [s.name for s in (*inputs, *outputs)]
    if len(set(names)) != len(names):
        raise SolutionError("definition inputs and outputs must have distinct names")
    constraints = obj.get("constraints") or []
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise SolutionError("definition.constraints must be a list of strings")
    tolerance = obj.get("tolerance") or {}
    if not isinstance(tolerance, dict):
        raise SolutionError("definition.tolerance must be an object")
    return Definition(name, axes, inputs, outputs, tuple(constraints), tolerance)


# --- workload -------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputSource:
    kind: Literal["random", "scalar"]
    value: int | float | bool | None = None


@dataclass(frozen=True)
class Workload:
    uuid: str
    axes: Mapping[str, int]
    inputs: Mapping[str, InputSource]
    tolerance: Tolerance


def _tolerance(*layers: Mapping[str, Any]) -> Tolerance:
    """Later layers win (definition, then workload); SOL defaults fill the rest."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update({k: v for k, v in layer.items() if v is not None})
    known = {
        "max_atol",
        "max_rtol",
        "required_matched_ratio",
        "max_error_cap",
        "allow_negative_inf",
    }
    unknown = set(merged) - known
    if unknown:
        raise SolutionError(f"tolerance has unknown fields {sorted(unknown)}")
    numbers = {k: v for k, v in merged.items() if k != "allow_negative_inf"}
    for key, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SolutionError(f"tolerance.{key} must be a non-negative number")
    ratio = float(merged.get("required_matched_ratio", Tolerance.required_matched_ratio))
    if ratio > 1:
        raise SolutionError("tolerance.required_matched_ratio must be at most 1")
    cap = merged.get("max_error_cap")
    allow = merged.get("allow_negative_inf", False)
    if not isinstance(allow, bool):
        raise SolutionError("tolerance.allow_negative_inf must be a boolean")
    return Tolerance(
        atol=float(merged.get("max_atol", Tolerance.atol)),
        rtol=float(merged.get("max_rtol", Tolerance.rtol)),
        required_matched_ratio=ratio,
        max_error_cap=None if cap is None else float(cap),
        allow_negative_inf=allow,
    )


def parse_workload(obj: object, definition: Definition) -> Workload:
    if not isinstance(obj, dict):
        raise SolutionError("workload must be a JSON object")
    uuid = _require(obj, "uuid", str, "workload")
    if not 1 <= len(uuid) <= 200:
        raise SolutionError("workload.uuid must be 1..200 characters")
    where = f"workload {uuid}"
    raw_axes = _require(obj, "axes", dict, where)
    for axis_name, value in raw_axes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SolutionError(f"{where}: axis {axis_name!r} must be a non-negative integer")
    raw_inputs = _require(obj, "inputs", dict, where)
    inputs: dict[str, InputSource] = {}
    for spec in definition.inputs:
        source = raw_inputs.get(spec.name)
        if source is None:
            raise SolutionError(f"{where}: no descriptor for input {spec.name!r}")
        inputs[spec.name] = _input_source(source, spec, where)
    extra = set(raw_inputs) - {s.name for s in definition.inputs}
    if extra:
        raise SolutionError(f"{where}: descriptors for unknown inputs {sorted(extra)}")
    tolerance = obj.get("tolerance") or {}
    if not isinstance(tolerance, dict):
        raise SolutionError(f"{where}: tolerance must be an object")
    workload = Workload(uuid, dict(raw_axes), inputs, _tolerance(definition.tolerance, tolerance))
    definition.resolve_axes(workload.axes)  # fail early on missing/unknown axes
    return workload


def _input_source(source: object, spec: TensorSpec, where: str) -> InputSource:
    if not isinstance(source, dict):
        raise SolutionError(f"{where}: input {spec.name!r} descriptor must be an object")
    kind = source.get("type")
    if kind == "random":
        if spec.shape is None:
            raise SolutionError(f"{where}: scalar input {spec.name!r} needs a scalar value")
        return InputSource("random")
    if kind == "scalar":
        value = source.get("value")
        if not isinstance(value, (int, float, bool)):
            raise SolutionError(f"{where}: scalar input {spec.name!r} needs a numeric value")
        return InputSource("scalar", value)
    if kind == "safetensors":
        raise UnsupportedSolution(
            f"{where}: input {spec.name!r} is loaded from a safetensors blob; the agent has no "
            "blob store, so such workloads cannot be rerun yet"
        )
    if kind == "custom":
        raise UnsupportedSolution(
            f"{where}: input {spec.name!r} is generated by the definition's Python reference "
            "code (custom_inputs_entrypoint), which the agent never runs"
        )
    raise SolutionError(f"{where}: input {spec.name!r} has unknown type {kind!r}")


def parse_workloads_jsonl(text: str, definition: Definition) -> list[Workload]:
    workloads = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SolutionError(f"workload line {number}: invalid JSON ({exc.msg})") from None
        workloads.append(parse_workload(obj, definition))
    if not workloads:
        raise SolutionError("no workloads")
    uuids = [w.uuid for w in workloads]
    if len(set(uuids)) != len(uuids):
        raise SolutionError("workload uuids must be distinct")
    return workloads


# --- solution -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchArg:
    kind: Literal["input", "output", "scalar"]
    name: str | None = None  # the tensor, for input/output
    scalar_type: str | None = None
    value: str | int | float | None = None


@dataclass(frozen=True)
class LaunchSpec:
    grid: tuple[str | int, ...]
    block: tuple[str | int, ...]
    shared_mem_bytes: str | int
    args: tuple[LaunchArg, ...]


@dataclass(frozen=True)
class Solution:
    name: str
    definition: str
    author: str
    entry_point: str  # "<file>.cu::<kernel>", exactly as the solution states it
    entry_file: str
    kernel_name: str
    sources: Mapping[str, str]
    launch: LaunchSpec
    cuda_cflags: tuple[str, ...] = ()  # as submitted; the backend pins its own flags


def _refuse_binding(spec: Mapping[str, Any]) -> None:
    binding = spec.get("binding")
    if binding == SOLUTION_BINDING:
        return
    languages = spec.get("languages", spec.get("language"))
    python_languages = {"python", "pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend"}
    as_list = languages if isinstance(languages, list) else [languages]
    is_python = any(lang in python_languages for lang in as_list)
    if binding is None:
        stated = (
            "no binding (SOL ignores it for Python solutions)"
            if is_python
            else 'no binding, i.e. SOL\'s default "torch" binding'
        )
    else:
        stated = f"binding {binding!r}"
    runs = (
        "its Python entry point would have to run inside the agent"
        if is_python
        else "its host C++ (a torch extension) would have to run inside the agent"
    )
    raise UnsupportedSolution(
        f'the KernelIndex agent only runs solutions with spec.binding "{SOLUTION_BINDING}" '
        f'(an extern "C" __global__ kernel in a .cu file plus a declarative spec.launch); '
        f"this solution has {stated}, so {runs}, and the agent never runs submitted Python or "
        "host code: it compiles the kernel itself and launches it with arguments it chose, so "
        "that it can poison outputs, hash inputs and time the kernel alone"
    )


def _launch_arg(obj: object, where: str) -> LaunchArg:
    if not isinstance(obj, dict) or len(obj.keys() & {"input", "output", "scalar"}) != 1:
        raise SolutionError(f"{where}: must be {{input}}, {{output}} or {{scalar, value}}")
    if "input" in obj or "output" in obj:
        kind: Literal["input", "output"] = "input" if "input" in obj else "output"
        if set(obj) != {kind} or not isinstance(obj[kind], str):
            raise SolutionError(f"{where}: {{{kind!r}: <tensor name>}} takes nothing else")
        return LaunchArg(kind, name=obj[kind])
    if set(obj) != {"scalar", "value"}:
        raise SolutionError(f"{where}: a scalar argument is {{scalar: <type>, value: <expr>}}")
    scalar_type = obj["scalar"]
    if scalar_type not in SCALAR_TYPES:
        raise SolutionError(
            f"{where}: scalar type {scalar_type!r} not in {', '.join(SCALAR_TYPES)}"
        )
    value = obj["value"]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SolutionError(f"{where}: scalar value must be an expression string or a number")
    if isinstance(value, float) and not scalar_type.startswith("float"):
        raise SolutionError(f"{where}: {scalar_type} scalar value must be an integer")
    return LaunchArg("scalar", scalar_type=scalar_type, value=value)


def _expression_list(obj: object, where: str) -> tuple[str | int, ...]:
    if not isinstance(obj, list) or not 1 <= len(obj) <= 3:
        raise SolutionError(f"{where} must be a list of 1 to 3 expressions")
    for item in obj:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise SolutionError(f"{where}: each entry must be an expression string or integer")
    return tuple(obj)


def parse_solution(obj: object) -> Solution:
    """Parse and vet a Solution document; raises UnsupportedSolution for other bindings."""
    if not isinstance(obj, dict):
        raise SolutionError("solution must be a JSON object")
    spec = _require(obj, "spec", dict, "solution")
    _refuse_binding(spec)
    languages = spec.get("languages")
    if languages != ["cuda_cpp"]:
        raise UnsupportedSolution(
            f'a "{SOLUTION_BINDING}" solution must have spec.languages ["cuda_cpp"], '
            f"got {languages!r}"
        )
    dependencies = spec.get("dependencies") or []
    if dependencies:
        raise UnsupportedSolution(
            f"dependencies {dependencies!r} are not available to a single "
            f'"{SOLUTION_BINDING}" kernel (no host code links libraries); list none'
        )
    entry_point = _require(spec, "entry_point", str, "solution.spec")
    entry_file, sep, kernel_name = entry_point.partition("::")
    if not sep or not entry_file.endswith(".cu") or not _IDENTIFIER.match(kernel_name):
        raise SolutionError(
            f'spec.entry_point must be "<file>.cu::<extern C kernel name>", got {entry_point!r}'
        )
    raw_sources = _require(obj, "sources", list, "solution")
    if not 1 <= len(raw_sources) <= MAX_SOURCES:
        raise SolutionError(f"solution needs 1 to {MAX_SOURCES} sources")
    sources: dict[str, str] = {}
    total = 0
    for index, source in enumerate(raw_sources):
        where = f"solution.sources[{index}]"
        if not isinstance(source, dict):
            raise SolutionError(f"{where} must be an object")
        path = _require(source, "path", str, where)
        content = _require(source, "content", str, where)
        parts = path.split("/")
        if (
            not _SOURCE_PATH.match(path)
            or path.startswith("/")
            or any(p in ("", ".", "..") for p in parts)
        ):
            raise SolutionError(f"{where}.path {path!r} must be a relative path without '..'")
        if path in sources:
            raise SolutionError(f"duplicate source path {path!r}")
        total += len(content.encode("utf-8"))
        sources[path] = content
    if total > MAX_SOURCE_BYTES:
        raise SolutionError(f"sources exceed {MAX_SOURCE_BYTES} bytes")
    if entry_file not in sources:
        raise SolutionError(f"entry point file {entry_file!r} is not among the sources")
    raw_launch = _require(spec, "launch", dict, "solution.spec")
    unknown = set(raw_launch) - {"grid", "block", "sharedMemBytes", "args"}
    if unknown:
        raise SolutionError(f"spec.launch has unknown fields {sorted(unknown)}")
    raw_args = _require(raw_launch, "args", list, "spec.launch")
    if len(raw_args) > MAX_LAUNCH_ARGS:
        raise SolutionError(f"spec.launch.args has more than {MAX_LAUNCH_ARGS} entries")
    shared = raw_launch.get("sharedMemBytes", 0)
    if isinstance(shared, bool) or not isinstance(shared, (str, int)):
        raise SolutionError("spec.launch.sharedMemBytes must be an expression string or integer")
    launch = LaunchSpec(
        grid=_expression_list(raw_launch.get("grid"), "spec.launch.grid"),
        block=_expression_list(raw_launch.get("block"), "spec.launch.block"),
        shared_mem_bytes=shared,
        args=tuple(_launch_arg(a, f"spec.launch.args[{i}]") for i, a in enumerate(raw_args)),
    )
    options = spec.get("compile_options") or {}
    flags = options.get("cuda_cflags", []) if isinstance(options, dict) else []
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise SolutionError("spec.compile_options.cuda_cflags must be a list of strings")
    return Solution(
        name=_require(obj, "name", str, "solution"),
        definition=_require(obj, "definition", str, "solution"),
        author=_require(obj, "author", str, "solution"),
        entry_point=entry_point,
        entry_file=entry_file,
        kernel_name=kernel_name,
        sources=sources,
        launch=launch,
        cuda_cflags=tuple(flags),
    )


def check_against_definition(solution: Solution, definition: Definition) -> None:
    """The launch may only name the definition's tensors, and must pass every output."""
    if solution.definition != definition.name:
        raise SolutionError(
            f"solution solves {solution.definition!r}, the job's definition is {definition.name!r}"
        )
    inputs = {s.name for s in definition.inputs}
    outputs = {s.name for s in definition.outputs}
    passed: set[str] = set()
    for index, arg in enumerate(solution.launch.args):
        if arg.kind == "input" and arg.name not in inputs:
            raise SolutionError(f"spec.launch.args[{index}]: {arg.name!r} is not an input")
        if arg.kind == "output" and arg.name not in outputs:
            raise SolutionError(f"spec.launch.args[{index}]: {arg.name!r} is not an output")
        if arg.name is not None:
            passed.add(arg.name)
    missing = sorted(outputs - passed)
    if missing:
        raise SolutionError(f"spec.launch.args never passes output(s) {missing}")


# --- a resolved launch for one workload -----------------------------------------------------


@dataclass(frozen=True)
class ResolvedLaunch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem_bytes: int
    # ("input" | "output", tensor name) or ("scalar", numpy scalar of the declared type).
    args: tuple[tuple[str, Any], ...]


def _scalar(scalar_type: str, value: str | int | float, axes: Mapping[str, int]) -> np.generic:
    dtype = SCALAR_TYPES[scalar_type]
    number: int | float = expressions.evaluate(value, axes) if isinstance(value, str) else value
    if dtype.kind in "iu":
        low, high = _int_range(dtype)
        if not low <= int(number) <= high:
            raise LaunchSpecError(f"{scalar_type} scalar {number} is out of range")
    result: np.generic = dtype.type(number)
    if dtype.kind == "f" and not np.isfinite(result):
        raise LaunchSpecError(f"{scalar_type} scalar {number} is not finite")
    return result


def resolve_launch(launch: LaunchSpec, axes: Mapping[str, int]) -> ResolvedLaunch:
    """Evaluate every expression of ``launch`` for one workload's axes (LaunchSpecError)."""
    args: list[tuple[str, Any]] = []
    for arg in launch.args:
        if arg.kind == "scalar":
            assert arg.scalar_type is not None and arg.value is not None
            args.append(("scalar", _scalar(arg.scalar_type, arg.value, axes)))
        else:
            args.append((arg.kind, arg.name))
    return ResolvedLaunch(
        grid=expressions.grid_dims(launch.grid, axes),
        block=expressions.block_dims(launch.block, axes),
        shared_mem_bytes=expressions.shared_mem_bytes(launch.shared_mem_bytes, axes),
        args=tuple(args),
    )


def scalar_input(spec: TensorSpec, value: int | float | bool) -> np.generic:
    """A definition scalar input (shape null) as a numpy scalar of its dtype."""
    dtype = spec.numpy_dtype
    if dtype.kind in "iu":
        if isinstance(value, float) and not float(value).is_integer():
            raise SolutionError(f"scalar {spec.name!r} ({spec.dtype}) got non-integer {value}")
        low, high = _int_range(dtype)
        if not low <= int(value) <= high:
            raise SolutionError(f"scalar {spec.name!r} ({spec.dtype}) out of range: {value}")
        return dtype.type(int(value))
    return dtype.type(value)


def _int_range(dtype: np.dtype[np.generic]) -> tuple[int, int]:
    info = np.iinfo(cast(Any, dtype))
    return int(info.min), int(info.max)


def tensor_names(specs: Sequence[TensorSpec]) -> list[str]:
    return [s.name for s in specs]
