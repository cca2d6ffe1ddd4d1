"""Observations of the case child's own process, taken around every call of the solution.

Why: work deferred to a thread or a child process, code generated or native libraries loaded
at run time, and side-stream work all leave traces in the process that a check of the
outputs alone cannot see. Each function here reads one such trace, cheaply (they run after
every timed call, outside the timed region):

* threads: ``threading.enumerate()`` (Python threads, with names) and ``/proc/self/task``
  (native threads too: OpenMP pools, threads a C extension starts);
* child processes: ``/proc/self/task/*/children`` (work handed to a forked process);
* modules: ``sys.modules`` entries that appeared, split into those the installed runtime
  provides (stdlib, site-packages: recorded, allowed) and code from anywhere else — the
  solution's working directory, or no file at all (generated at run time: flagged);
* native libraries: new shared objects in ``/proc/self/maps`` (``ctypes.CDLL``, a torch
  extension built at run time) outside the Python installation and the CUDA driver;
* torch.cuda on a CPU case: a profile hook that sees calls into ``torch.cuda``'s stream,
  event and synchronisation code while the case's device is the CPU (a solution reaching
  for another stream; what that would hide is only measurable on a GPU).
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_GPU_DRIVER_LIBS = re.compile(r"/lib(cuda|nvidia-[a-z-]+|nvrtc|cublas|cudnn|cupti)[^/]*\.so")
_INSTALL_ROOTS = tuple(
    sorted(
        {
            str(Path(p).resolve())
            for p in (
                sys.prefix,
                sys.base_prefix,
                sysconfig.get_paths()["stdlib"],
                sysconfig.get_paths()["platstdlib"],
                sysconfig.get_paths()["purelib"],
                sysconfig.get_paths()["platlib"],
                Path(__file__).resolve().parents[1],  # the agent's own package
            )
        }
    )
)
# torch.cuda functions any code may call on a CPU device (feature probes, not device work).
_CUDA_PROBES = frozenset(
    {"is_available", "device_count", "is_initialized", "_is_compiled", "_nvml_based_avail"}
)


def native_threads() -> int:
    """Threads of this process, native ones included."""
    return len(os.listdir("/proc/self/task"))


def python_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate())


def child_processes() -> list[int]:
    """Live child processes of this process (any of its threads)."""
    found: list[int] = []
    for task in os.listdir("/proc/self/task"):
        try:
            text = Path(f"/proc/self/task/{task}/children").read_text()
        except OSError:
            continue
        found.extend(int(pid) for pid in text.split())
    return sorted(found)


def native_libraries() -> set[str]:
    """Paths of the shared objects mapped into this process."""
    found: set[str] = set()
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and ".so" in parts[5]:
                found.add(parts[5].strip())
    return found


def _installed(path: str) -> bool:
    try:
        resolved = str(Path(path).resolve())
    except OSError:
        return False
    return resolved.startswith(_INSTALL_ROOTS)


def foreign_libraries(new: set[str]) -> list[str]:
    """The new shared objects that neither the Python installation nor the driver provide."""
    return sorted(p for p in new if not _installed(p) and not _GPU_DRIVER_LIBS.search(p))


def _module_file(module: Any) -> str | None:
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None) if spec is not None else None
    file = getattr(module, "__file__", None) or origin
    return file if isinstance(file, str) else None


def foreign_modules(names: set[str]) -> list[str]:
    """The new modules that are not part of the installed runtime (see the module doc)."""
    foreign: list[str] = []
    for name in sorted(names):
        module = sys.modules.get(name)
        if module is None or name in sys.builtin_module_names:
            continue
        file = _module_file(module)
        if file in ("built-in", "frozen"):
            continue
        if file is None:
            if isinstance(module, types.ModuleType) and hasattr(module, "__path__"):
                continue  # a namespace package: a folder, no code of its own
            foreign.append(f"{name} (no file: made at run time)")
        elif not _installed(file):
            foreign.append(f"{name} ({file})")
    return foreign


@dataclass
class ProcessState:
    """One observation of the process: what :func:`observe` reads."""

    threads: int
    thread_names: list[str]
    children: list[int]
    modules: set[str]
    libraries: set[str]


def observe() -> ProcessState:
    return ProcessState(
        native_threads(), python_threads(), child_processes(), set(sys.modules), native_libraries()
    )


@dataclass
class CudaTouches:
    """Calls into torch.cuda's device code seen by :func:`cuda_calls_on_cpu`."""

    calls: list[str] = field(default_factory=list)
    hook_removed: bool = False


def _cuda_hook(root: str, seen: CudaTouches) -> Callable[[types.FrameType, str, Any], None]:
    def hook(frame: types.FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_filename.startswith(root) and code.co_name not in _CUDA_PROBES:
            where = f"torch/cuda/{Path(code.co_filename).name}:{code.co_qualname}"
            if where not in seen.calls and len(seen.calls) < 8:
                seen.calls.append(where)

    return hook


@contextmanager
def cuda_calls_on_cpu(torch_cuda_dir: str) -> Iterator[CudaTouches]:
    """Record calls into code under ``torch_cuda_dir`` made in the ``with`` block."""
    seen = CudaTouches()
    hook = _cuda_hook(torch_cuda_dir, seen)
    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        yield seen
    finally:
        seen.hook_removed = sys.getprofile() is not hook
        sys.setprofile(previous)
