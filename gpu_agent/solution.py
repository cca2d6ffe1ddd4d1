"""SOL-ExecBench Solution documents of the declarative kernel binding, as the agent runs them.

Formats: fixtures/sol-execbench/docs/{solution,definition,workload}.md. This module parses
the declarative Solution document; the others are parsed in ``gpu_agent/definition.py``,
``gpu_agent/workload.py`` and ``gpu_agent/launch_spec.py`` (``spec.launch``), and every other
kind of solution (Python, Triton, torch-binding C++) in ``gpu_agent/python_solutions/spec.py``,
whose ``parse_job_solution`` routes a document to the right parser. A declarative solution is
``spec.binding`` equal to ``SOLUTION_BINDING``, ``spec.languages == ["cuda_cpp"]``,
``spec.entry_point == "<file>.cu::<extern "C" kernel>"`` — plus a declarative
``spec.launch`` that KernelIndex adds to the SOL format::

    "launch": {
      "grid": ["ceil_div(batch_size, 4)"],          # 1–3 integer expressions
      "block": [256],                               # 1–3, ≤ 1024 threads in total
      "sharedMemBytes": "0",                        # optional, default 0
      "args": [{"input": "hidden_states"}, {"input": "weight"}, {"output": "output"},
               {"scalar": "int32", "value": "batch_size"}]
    }

:func:`parse_solution` refuses every other kind with :class:`UnsupportedSolution`: for this
binding no submitted host code runs at all — only a kernel the agent compiled itself, launched
with arguments it chose, so that it can poison, hash and time around it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpu_agent.backends.registry import SOLUTION_BINDING
from gpu_agent.definition import Definition
from gpu_agent.launch_spec import LaunchSpec, parse_launch
from gpu_agent.sol_parsing import IDENTIFIER, SolutionError, UnsupportedSolution, require

MAX_SOURCES = 64
MAX_SOURCE_BYTES = 4 * 1024 * 1024
_SOURCE_PATH = re.compile(r"^[A-Za-z0-9_.\-/]{1,200}$")
_PYTHON_LANGUAGES = frozenset(
    {"python", "pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend"}
)


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
    as_list = languages if isinstance(languages, list) else [languages]
    is_python = any(lang in _PYTHON_LANGUAGES for lang in as_list)
    if binding is None:
        stated = (
            "no binding (SOL ignores it for Python solutions)"
            if is_python
            else 'no binding, i.e. SOL\'s default "torch" binding'
        )
    else:
        stated = f"binding {binding!r}"
    runs = (
        "its Python entry point would have to run"
        if is_python
        else "its host C++ (a torch extension) would have to run"
    )
    raise UnsupportedSolution(
        f'the declarative path only runs solutions with spec.binding "{SOLUTION_BINDING}" '
        f'(an extern "C" __global__ kernel in a .cu file plus a declarative spec.launch); '
        f"this solution has {stated}, so {runs}, which this path never does: it compiles "
        "the kernel itself and launches it with arguments it chose (such solutions go to "
        "gpu_agent/python_solutions, in a sandboxed child)"
    )


def _check_kind(spec: Mapping[str, Any]) -> None:
    """The one kind of solution the agent runs: the binding, CUDA C++ only, no dependencies."""
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


def _entry_point(spec: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(entry_point, entry file, kernel name)`` from ``spec.entry_point``."""
    entry_point = require(spec, "entry_point", str, "solution.spec")
    entry_file, sep, kernel_name = entry_point.partition("::")
    if not sep or not entry_file.endswith(".cu") or not IDENTIFIER.match(kernel_name):
        raise SolutionError(
            f'spec.entry_point must be "<file>.cu::<extern C kernel name>", got {entry_point!r}'
        )
    return entry_point, entry_file, kernel_name


def _is_safe_path(path: str) -> bool:
    parts = path.split("/")
    return bool(
        _SOURCE_PATH.match(path)
        and not path.startswith("/")
        and not any(p in ("", ".", "..") for p in parts)
    )


def parse_sources(raw_sources: list[Any]) -> dict[str, str]:
    """``solution.sources`` as path → text: relative paths, distinct, within the size cap."""
    if not 1 <= len(raw_sources) <= MAX_SOURCES:
        raise SolutionError(f"solution needs 1 to {MAX_SOURCES} sources")
    sources: dict[str, str] = {}
    total = 0
    for index, source in enumerate(raw_sources):
        where = f"solution.sources[{index}]"
        if not isinstance(source, dict):
            raise SolutionError(f"{where} must be an object")
        path = require(source, "path", str, where)
        content = require(source, "content", str, where)
        if not _is_safe_path(path):
            raise SolutionError(f"{where}.path {path!r} must be a relative path without '..'")
        if path in sources:
            raise SolutionError(f"duplicate source path {path!r}")
        total += len(content.encode("utf-8"))
        sources[path] = content
    if total > MAX_SOURCE_BYTES:
        raise SolutionError(f"sources exceed {MAX_SOURCE_BYTES} bytes")
    return sources


def cuda_cflags(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """``spec.compile_options.cuda_cflags`` as submitted (the backend pins its own flags)."""
    options = spec.get("compile_options") or {}
    flags = options.get("cuda_cflags", []) if isinstance(options, dict) else None
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise SolutionError("spec.compile_options.cuda_cflags must be a list of strings")
    return tuple(flags)


def sources_with_entry(obj: Mapping[str, Any], entry_file: str) -> dict[str, str]:
    """The solution's sources, which must hold the entry point's file."""
    sources = parse_sources(require(obj, "sources", list, "solution"))
    if entry_file not in sources:
        raise SolutionError(f"entry point file {entry_file!r} is not among the sources")
    return sources


def parse_solution(obj: object) -> Solution:
    """Parse and vet a Solution document; raises UnsupportedSolution for other bindings."""
    if not isinstance(obj, dict):
        raise SolutionError("solution must be a JSON object")
    spec = require(obj, "spec", dict, "solution")
    _check_kind(spec)
    entry_point, entry_file, kernel_name = _entry_point(spec)
    sources = sources_with_entry(obj, entry_file)
    launch = parse_launch(require(spec, "launch", dict, "solution.spec"))
    flags = cuda_cflags(spec)
    return Solution(
        name=require(obj, "name", str, "solution"),
        definition=require(obj, "definition", str, "solution"),
        author=require(obj, "author", str, "solution"),
        entry_point=entry_point,
        entry_file=entry_file,
        kernel_name=kernel_name,
        sources=sources,
        launch=launch,
        cuda_cflags=flags,
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
