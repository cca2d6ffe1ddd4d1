"""The body of a Python-solution case child: set up, load, measure, report.

Why this order (each step before the next, and never the other way round):

1. the sandbox is already entered (``gpu_agent/child_process.py``); torch is imported here,
   with its intra-op pool at one thread on the CPU (so other threads' CPU time means
   something) and the device fingerprint read;
2. (the solution's dependencies were checked by the harness before any child started:
   gpu_agent/python_solutions/routing.py);
3. the definition's reference code is imported, and **every round's inputs and reference
   outputs are made now** — before any submitted code exists in the process — from the
   seeds the task hands over once; the task then holds no seed (``task.take_rounds``);
4. the identity guard takes hold of every measuring and judging function, and the process
   is observed (threads, child processes, modules, native libraries);
5. only then is the solution imported, from the sandbox's working directory, and its entry
   point's signature checked; then ``torch_case.CaseRun`` runs the rounds and the timing.

A detected cheat (``defences.Detected``) becomes an ``incorrect`` case whose code names the
defence (``reward-hack:<defence>``); the solution raising, or failing to import, an ``error``
case (``solution-raised``, ``import-failed``). The words that say more stay in this child:
the harness signs the codes only (gpu_agent/result_assembly.py). The build record is the
harness's too (``result_assembly.python_build``), made from nothing this child reports.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from domain.statements import CaseReason, Defence, reward_hack
from gpu_agent.backends.registry import create_backend
from gpu_agent.case_task import AgentFault, CaseOutcome
from gpu_agent.python_solutions import sandbox, watch
from gpu_agent.python_solutions.defences import DefenceLog, Detected, IdentityGuard
from gpu_agent.python_solutions.spec import TorchSolution
from gpu_agent.python_solutions.task import TorchCaseTask
from gpu_agent.python_solutions.torch_case import CaseRun, PreparedRound, SolutionFailed

REFERENCE_MODULE = "_kernelindex_reference"
# Dependencies that name C/C++ libraries rather than Python packages (SOL's list).
_LIBRARY_DEPENDENCIES = re.compile(r"^(cutlass(_\d+(_\d+)*)?|cublas|cudnn)$", re.IGNORECASE)
_IMPORT_NAMES = {"torch": "torch", "triton": "triton", "flashinfer": "flashinfer"}


def run(task: TorchCaseTask) -> CaseOutcome:
    """Run one case of a Python solution (see the module doc)."""
    device = torch.device("cpu")
    torch.set_num_threads(1)
    log = DefenceLog()
    _record_sandbox(log)
    fingerprint = asdict(create_backend(task.backend_name, task.backend_options).device())
    run_reference, custom = _load_reference(task)
    rounds = [
        PreparedRound.make(task, spec, device, run_reference, custom) for spec in task.take_rounds()
    ]
    log.passed(
        "reference-before-solution",
        f"inputs and reference outputs of {len(rounds)} rounds made before the solution was "
        "imported; the task holds no seed since",
    )
    guard = IdentityGuard()
    baseline = watch.observe()
    try:
        function = _import_solution(task.solution, log, guard)
        mismatch = check_signature(function, expected_parameters(task))
        if mismatch is not None:
            raise SolutionFailed(f"signature: {mismatch}", CaseReason.SIGNATURE_MISMATCH)
        outcome = CaseRun(task, function, rounds, guard, baseline, log, device, custom).measure()
    except Detected as caught:
        outcome = CaseOutcome(
            "incorrect",
            f"reward hack detected ({caught.name}): {caught.detail}",
            code=reward_hack(Defence(caught.name)),
        )
    except SolutionFailed as failed:
        outcome = CaseOutcome("error", str(failed), code=failed.code)
    outcome.defences = log.as_json()
    outcome.device = fingerprint
    return outcome


def _record_sandbox(log: DefenceLog) -> None:
    if sandbox.ENTERED:
        log.passed("sandbox", sandbox.ENTERED[0].describe())
    else:
        log.skipped("sandbox", "this child was started without the sandbox")


def _load_module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _load_reference(task: TorchCaseTask) -> tuple[Callable[..., Any], Callable[..., Any] | None]:
    """The definition's reference ``run`` and custom input generator, written to a file of
    their own (decorators such as ``triton.jit`` read their source back) and imported."""
    definition = task.definition
    folder = Path.cwd() / "_reference"
    folder.mkdir(exist_ok=True)
    path = folder / "reference.py"
    path.write_text(definition.reference or "", encoding="utf-8")
    try:
        module = _load_module(REFERENCE_MODULE, path)
    except Exception as exc:
        raise AgentFault(f"the definition's reference code does not import: {exc}") from exc
    run_reference = getattr(module, "run", None)
    if not callable(run_reference):
        raise AgentFault("the definition's reference code defines no run()")
    custom = None
    if definition.custom_inputs_entrypoint:
        custom = getattr(module, definition.custom_inputs_entrypoint, None)
    return run_reference, custom


def _write_sources(sources: Mapping[str, str]) -> Path:
    folder = Path.cwd() / "solution"
    for relative, text in sources.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return folder


def _import_solution(
    solution: TorchSolution, log: DefenceLog, guard: IdentityGuard
) -> Callable[..., Any]:
    """Import the entry point; the identity guard checks what the import itself changed."""
    folder = _write_sources(solution.sources)
    sys.path.insert(0, str(folder))
    name = solution.entry_file.removesuffix(".py").replace("/", ".")
    try:
        module = _load_module(name, folder / solution.entry_file)
    except BaseException as exc:  # SystemExit too: the solution's failure, not the agent's
        raise SolutionFailed(
            f"importing {solution.entry_file} failed: {type(exc).__name__}: {exc}",
            CaseReason.IMPORT_FAILED,
        ) from exc
    replaced = guard.replaced()
    log.check(
        "harness-integrity",
        [f"replaced when the solution was imported: {', '.join(replaced)}"] if replaced else [],
        f"{len(guard)} timing, comparison and harness functions unchanged",
    )
    function = getattr(module, solution.function, None)
    if not callable(function):
        raise SolutionFailed(
            f"{solution.entry_file} defines no function {solution.function!r}",
            CaseReason.IMPORT_FAILED,
        )
    entry: Callable[..., Any] = function  # checked callable above
    return entry


def expected_parameters(task: TorchCaseTask) -> list[str]:
    names = [s.name for s in task.definition.inputs]
    if task.solution.destination_passing:
        names += [s.name for s in task.definition.outputs]
    return names


def check_signature(function: Callable[..., Any], expected: list[str]) -> str | None:
    """Why ``function``'s parameters are not ``expected`` (SOL: names must match; a trailing
    ``**kwargs`` is allowed); None when they are, or cannot be read."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    named = [p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD]
    if named != expected:
        takes, needs = ", ".join(named), ", ".join(expected)
        return f"the entry point takes ({takes}), the definition needs ({needs})"
    return None
