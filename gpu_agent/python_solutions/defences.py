"""The reward-hack defences' bookkeeping, and the identity guard over the harness's functions.

Why: every defence that ran on a case must end up in the signed result with its outcome
(``rerun/v1`` ``cases[].defences``), and a defence that fails must fail the case — it can
refute, never verify (``domain.statements.RerunCase`` refuses a passed case with a failed
defence). :class:`DefenceLog` collects those records; a failure raises :class:`Detected`,
which the runner turns into an ``incorrect`` case whose reason names the defence.

:class:`IdentityGuard` is the monkey-patching defence. Before the solution is imported it
holds a reference to every function that measures or judges (the clocks, CUDA events and
synchronisation, comparison functions, the tensor methods the harness reads outputs with, the
harness's own modules and classes, the pipe the result goes back through); afterwards — after
the import and after every call — each must still be the very same object. Holding the
objects (not their ``id``) means a freed-and-reused address cannot fake a match.

Torch-free: the names are resolved through ``sys.modules`` when the guard is made.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Outcome = str  # "passed", "failed" or "skipped" (domain.statements.DefenceOutcome)

# Functions whose replacement would let a solution fake a time or a comparison.
CRITICAL = (
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.monotonic",
    "time.monotonic_ns",
    "time.clock_gettime_ns",
    "time.process_time_ns",
    "time.thread_time_ns",
    "time.time_ns",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.record",
    "torch.cuda.Event.synchronize",
    "torch.cuda.Event.query",
    "torch.cuda.synchronize",
    "torch.cuda.current_stream",
    "torch.cuda.Stream.synchronize",
    "torch.allclose",
    "torch.isclose",
    "torch.equal",
    "torch.testing.assert_close",
    "torch.empty",
    "torch.from_numpy",
    "torch.manual_seed",
    "torch.Tensor.clone",
    "torch.Tensor.contiguous",
    "torch.Tensor.is_contiguous",
    "torch.Tensor.cpu",
    "torch.Tensor.detach",
    "torch.Tensor.view",
    "torch.Tensor.numpy",
    "torch.Tensor.copy_",
    "torch.Tensor.fill_",
    "torch.Tensor.normal_",
    "torch.Tensor.random_",
    "torch.Tensor.data_ptr",
    "torch.Tensor.to",
    "numpy.asarray",
    "numpy.abs",
    "numpy.isfinite",
    "numpy.frombuffer",
    "numpy.ascontiguousarray",
    "hashlib.sha256",
    "threading.enumerate",
    "os.listdir",
    "sys.setprofile",
    "sys.getprofile",
    "builtins.type",
    "builtins.isinstance",
    "builtins.open",
    "inspect.signature",
    "multiprocessing.connection.Connection.send",
)
# Modules whose every function and class (and the classes' functions) the guard holds.
HARNESS_MODULES = (
    "gpu_agent.checks",
    "gpu_agent.python_solutions.defences",
    "gpu_agent.python_solutions.watch",
    "gpu_agent.python_solutions.timing",
    "gpu_agent.python_solutions.torch_io",
    "gpu_agent.python_solutions.torch_runner",
    "gpu_agent.python_solutions.torch_case",
    "gpu_agent.python_solutions.sandbox",
    "gpu_agent.case_task",
    "gpu_agent.checks",
    "gpu_agent.stats",
    "gpu_agent.inputs",
    "gpu_agent.child_process",
)


class Detected(Exception):
    """A defence caught the solution cheating; ``name`` says which."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name
        self.detail = detail


@dataclass
class _Record:
    outcome: Outcome
    detail: str
    runs: int = 0


@dataclass
class DefenceLog:
    """Every defence that ran on the case, in the order first run, with its outcome."""

    records: dict[str, _Record] = field(default_factory=dict)

    def passed(self, name: str, detail: str) -> None:
        record = self.records.setdefault(name, _Record("passed", detail))
        record.runs += 1
        if record.outcome == "passed":
            record.detail = detail

    def skipped(self, name: str, detail: str) -> None:
        self.records.setdefault(name, _Record("skipped", detail))

    def failed(self, name: str, detail: str) -> Detected:
        """Record the failure and return the exception to raise."""
        record = self.records.setdefault(name, _Record("failed", detail))
        record.runs += 1
        record.outcome, record.detail = "failed", detail
        return Detected(name, detail)

    def check(self, name: str, problems: Iterable[str], passed_detail: str) -> None:
        """Record the defence; raise :class:`Detected` when it found problems."""
        found = list(problems)
        if found:
            raise self.failed(name, "; ".join(found))
        self.passed(name, passed_detail)

    def as_json(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for name, record in self.records.items():
            detail = record.detail
            if record.outcome == "passed" and record.runs > 1:
                detail = f"{detail} ({record.runs} checks)"
            out.append(
                {"name": name, "outcome": record.outcome, "detail": detail, "runs": record.runs}
            )
        return out


_MISSING = object()


def _resolve(dotted: str) -> tuple[Any, str] | None:
    """``(owner, attribute)`` for a dotted name whose module is imported, else None."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        owner: Any = module
        for part in parts[cut:-1]:
            owner = getattr(owner, part, _MISSING)
            if owner is _MISSING:
                return None
        return owner, parts[-1]
    return None


def _current(owner: Any, attribute: str) -> Any:
    if isinstance(owner, type):
        return owner.__dict__.get(attribute, getattr(owner, attribute, _MISSING))
    return getattr(owner, attribute, _MISSING)


def _harness_entries(module_name: str) -> list[tuple[str, Any, str, Any]]:
    module = importlib.import_module(module_name)
    entries: list[tuple[str, Any, str, Any]] = []
    for attribute, value in vars(module).items():
        if isinstance(value, types.FunctionType | type) and not attribute.startswith("__"):
            entries.append((f"{module_name}.{attribute}", module, attribute, value))
        if isinstance(value, type) and value.__module__ == module_name:
            for member, function in vars(value).items():
                if isinstance(function, types.FunctionType):
                    label = f"{module_name}.{attribute}.{member}"
                    entries.append((label, value, member, function))
    return entries


class IdentityGuard:
    """Holds the measuring and judging functions; says which were replaced since."""

    def __init__(
        self, names: Iterable[str] = CRITICAL, modules: Iterable[str] = HARNESS_MODULES
    ) -> None:
        self._held: list[tuple[str, Any, str, Any]] = []
        for dotted in names:
            found = _resolve(dotted)
            if found is not None:
                owner, attribute = found
                value = _current(owner, attribute)
                if value is not _MISSING:
                    self._held.append((dotted, owner, attribute, value))
        for module_name in modules:
            self._held.extend(_harness_entries(module_name))

    def __len__(self) -> int:
        return len(self._held)

    def replaced(self) -> list[str]:
        """What no longer is what was held, each name once (a function can be held both by
        name and as a member of a harness module)."""
        found = (
            label
            for label, owner, attribute, value in self._held
            if _current(owner, attribute) is not value
        )
        return list(dict.fromkeys(found))
