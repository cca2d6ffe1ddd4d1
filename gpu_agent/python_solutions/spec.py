"""Parse SOL-ExecBench / FlashInfer-Bench solutions that run through PyTorch, and route every
solution document to the parser of its kind.

Why: the agent used to refuse everything but the declarative kernel binding. Real
solutions are Python (``pytorch``, ``python``), Triton, other Python DSLs, or C++ with SOL's
default ``torch`` binding. :func:`parse_job_solution` tells them apart and vets what can be
vetted without running anything; whether *this* agent can run the kind is
``gpu_agent/python_solutions/routing.py``'s question.

Formats: fixtures/sol-execbench/docs/solution.md (``spec.languages``, a list) and
FlashInfer-Bench (``spec.language``, one string). ``spec.destination_passing_style``
defaults to true (SOL): outputs are preallocated and passed after the inputs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpu_agent.backends.registry import SOLUTION_BINDING
from gpu_agent.definition import Definition
from gpu_agent.sol_parsing import IDENTIFIER, SolutionError, require
from gpu_agent.solution import Solution, cuda_cflags, parse_solution, sources_with_entry

SolutionKind = Literal["python", "triton", "gpu-dsl", "torch-cpp"]

# spec.languages value → the kind the agent runs it as.
_PYTHON_KINDS: dict[str, SolutionKind] = {
    "pytorch": "python",
    "python": "python",
    "triton": "triton",
    "cute_dsl": "gpu-dsl",
    "cutile": "gpu-dsl",
    "cudnn_frontend": "gpu-dsl",
}
_CPP_LANGUAGES = frozenset({"cuda_cpp", "cutlass", "cudnn", "cublas"})
_DEPENDENCY = re.compile(
    r"^\s*([A-Za-z0-9_.\-]+)\s*(?:(==|>=|<=|!=|>|<)\s*([0-9][0-9A-Za-z.+]*))?\s*$"
)
MAX_DEPENDENCIES = 16


@dataclass(frozen=True)
class Dependency:
    """One ``spec.dependencies`` entry: a package name and an optional version bound."""

    name: str
    operator: str | None = None
    version: str | None = None

    def text(self) -> str:
        return self.name if self.operator is None else f"{self.name} {self.operator} {self.version}"


@dataclass(frozen=True)
class TorchSolution:
    """A solution whose entry point the agent calls from PyTorch, in a sandboxed child."""

    name: str
    definition: str
    author: str
    kind: SolutionKind
    languages: tuple[str, ...]
    entry_point: str  # "<file>::<function>", as stated
    entry_file: str
    function: str
    sources: Mapping[str, str]
    destination_passing: bool
    dependencies: tuple[Dependency, ...] = ()
    cuda_cflags: tuple[str, ...] = ()


def _languages(spec: Mapping[str, Any]) -> tuple[str, ...]:
    raw = spec.get("languages", spec.get("language"))
    languages = raw if isinstance(raw, list) else [raw]
    if not languages or not all(isinstance(lang, str) and lang for lang in languages):
        raise SolutionError("spec.languages must be a non-empty list of language names")
    return tuple(languages)


def _kind(languages: tuple[str, ...]) -> SolutionKind:
    cpp = [lang for lang in languages if lang in _CPP_LANGUAGES]
    python = [lang for lang in languages if lang in _PYTHON_KINDS]
    unknown = sorted(set(languages) - _CPP_LANGUAGES - set(_PYTHON_KINDS))
    if unknown:
        raise SolutionError(f"spec.languages has unknown language(s) {unknown}")
    if cpp and python:
        raise SolutionError("spec.languages mixes C++ and Python languages (SOL forbids it)")
    if cpp:
        return "torch-cpp"
    kinds = {_PYTHON_KINDS[lang] for lang in python}
    # The most demanding language decides: Triton or a DSL needs a GPU, plain Python does not.
    for kind in ("gpu-dsl", "triton"):
        if kind in kinds:
            return kind
    return "python"


def _dependencies(spec: Mapping[str, Any]) -> tuple[Dependency, ...]:
    raw = spec.get("dependencies") or []
    if not isinstance(raw, list) or len(raw) > MAX_DEPENDENCIES:
        raise SolutionError(f"spec.dependencies must be a list of at most {MAX_DEPENDENCIES}")
    found: list[Dependency] = []
    for entry in raw:
        match = _DEPENDENCY.match(entry) if isinstance(entry, str) else None
        if match is None:
            raise SolutionError(f"spec.dependencies entry {entry!r} is not 'name [op version]'")
        found.append(Dependency(match.group(1), match.group(2), match.group(3)))
    return tuple(found)


def _entry_point(spec: Mapping[str, Any], kind: SolutionKind) -> tuple[str, str, str]:
    entry_point = require(spec, "entry_point", str, "solution.spec")
    entry_file, sep, function = entry_point.rpartition("::")
    suffixes = (".cu", ".cpp", ".cc", ".cuh") if kind == "torch-cpp" else (".py",)
    if not sep or not entry_file.endswith(suffixes) or not IDENTIFIER.match(function):
        raise SolutionError(
            f'spec.entry_point must be "<file>{"/".join(suffixes)}::<function>", '
            f"got {entry_point!r}"
        )
    return entry_point, entry_file, function


def parse_torch_solution(obj: Mapping[str, Any]) -> TorchSolution:
    """Parse a Python / Triton / DSL / torch-binding C++ solution document."""
    spec = require(obj, "spec", dict, "solution")
    languages = _languages(spec)
    kind = _kind(languages)
    if kind == "torch-cpp" and spec.get("binding") not in (None, "torch"):
        binding = spec.get("binding")
        raise SolutionError(f"spec.binding {binding!r} is not torch or {SOLUTION_BINDING}")
    entry_point, entry_file, function = _entry_point(spec, kind)
    sources = sources_with_entry(obj, entry_file)
    dps = spec.get("destination_passing_style", True)
    if not isinstance(dps, bool):
        raise SolutionError("spec.destination_passing_style must be a boolean")
    return TorchSolution(
        name=require(obj, "name", str, "solution"),
        definition=require(obj, "definition", str, "solution"),
        author=require(obj, "author", str, "solution"),
        kind=kind,
        languages=languages,
        entry_point=entry_point,
        entry_file=entry_file,
        function=function,
        sources=sources,
        destination_passing=dps,
        dependencies=_dependencies(spec),
        cuda_cflags=cuda_cflags(spec),
    )


def parse_job_solution(obj: object) -> Solution | TorchSolution:
    """Any solution document: the declarative kernel binding (``SOLUTION_BINDING``), or one
    that runs through PyTorch. Raises SolutionError for malformed documents."""
    if not isinstance(obj, dict):
        raise SolutionError("solution must be a JSON object")
    spec = require(obj, "spec", dict, "solution")
    if spec.get("binding") == SOLUTION_BINDING:
        return parse_solution(obj)
    return parse_torch_solution(obj)


def check_torch_against_definition(solution: TorchSolution, definition: Definition) -> None:
    """The solution must solve the job's definition, and the definition must carry the
    reference code every Python solution is judged against."""
    if solution.definition != definition.name:
        raise SolutionError(
            f"solution solves {solution.definition!r}, the job's definition is {definition.name!r}"
        )
    if not definition.reference:
        raise SolutionError(
            f"definition {definition.name!r} has no reference code: a Python solution is "
            "checked against the definition's own reference run()"
        )
