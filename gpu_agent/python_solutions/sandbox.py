"""The sandbox a case child enters before any submitted code exists in it.

Why: a case child holds submitted code (a Python solution it imports, CUDA source it hands to
nvcc), so whatever the child can see, that code can see. The child is started inside the
jail of ``gpu_agent/jail.py`` (its own user, PID, mount, IPC and network namespaces: no view
of the agent's processes, files, key or nonce, no network), with only the environment
:func:`scrubbed_environment` allows (the jail passes nothing else). Inside the jail, before
it runs anything submitted (``gpu_agent/jailed_child.py`` calls :func:`enter` first), it:

* replaces its environment with that allowlist (PATH, locale, CUDA/NVIDIA device selection,
  library paths, the agent's nvcc), dropping every other ``KERNELINDEX_*`` variable and
  anything that names a key, token, secret, password or credential even where a prefix would
  allow it; HOME, TMPDIR and the Triton / torch-extension caches point into the working
  directory;
* replaces ``sys.argv`` with a neutral one;
* works in the fresh working directory the parent made for this case (mounted at
  ``jail.WORKDIR``) and removes afterwards;
* lowers its resource limits (``resource.setrlimit``, soft = hard, never raised): address
  space (CPU backend only: CUDA maps more virtual memory than any sensible cap), CPU
  seconds, open files, file size, no core dumps. ``RLIMIT_NPROC`` is *not* set: Linux counts
  threads against it per user, so it would break the runtime's own threads and other
  processes of the agent's user; child processes are detected instead (``watch.py``).

The jail is what keeps a hostile solution from the agent; this sandbox keeps the child's
own surroundings tidy and bounded inside it.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

_KEEP = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "LD_LIBRARY_PATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
    }
)
_KEEP_PREFIXES = ("LC_", "CUDA_", "NVIDIA_")
_NEVER = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
# The agent's own variables a case needs: the nvcc it builds with (gpu_agent/build.py).
_TOOLCHAIN = frozenset({"KERNELINDEX_NVCC"})
GiB = 1024**3


@dataclass(frozen=True)
class Limits:
    """Resource limits for a case child; None leaves that limit as it is."""

    address_space_bytes: int | None = 32 * GiB
    cpu_seconds: int | None = 1_000
    open_files: int | None = 1_024
    file_size_bytes: int | None = 4 * GiB


@dataclass(frozen=True)
class SandboxSpec:
    """What the parent asks of a case child: its working directory and its limits."""

    workdir: str
    limits: Limits = field(default_factory=Limits)


@dataclass
class SandboxReport:
    """What :func:`enter` did, for the case's ``sandbox`` defence record."""

    kept: list[str] = field(default_factory=list)
    dropped: int = 0
    limits: dict[str, int] = field(default_factory=dict)
    workdir: str = ""

    def describe(self) -> str:
        limits = ", ".join(f"{k}={v}" for k, v in self.limits.items()) or "none"
        return (
            f"environment: {len(self.kept)} allowlisted variables kept, {self.dropped} dropped "
            "(no secret-like names); argv replaced; jailed (own user, PID, mount and network "
            "namespaces); fresh working directory; "
            f"rlimits {limits}; RLIMIT_NPROC not set (threads count against it)"
        )


# The report of the sandbox this process entered (None outside a sandboxed child).
ENTERED: list[SandboxReport] = []


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return upper.startswith("KERNELINDEX") or any(word in upper for word in _NEVER)


def scrubbed_environment(environ: Mapping[str, str], workdir: str) -> dict[str, str]:
    """The allowlisted part of ``environ``, with home and caches inside ``workdir``."""
    kept = {
        name: value
        for name, value in environ.items()
        if name in _TOOLCHAIN
        or ((name in _KEEP or name.startswith(_KEEP_PREFIXES)) and not is_secret_name(name))
    }
    home = Path(workdir)
    kept |= {
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "TRITON_CACHE_DIR": str(home / ".triton"),
        "TORCH_EXTENSIONS_DIR": str(home / "torch_extensions"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return kept


def _lower(limit: int, value: int) -> int | None:
    """Set soft = hard = ``value`` for ``limit`` unless the hard limit is already lower."""
    _, hard = resource.getrlimit(limit)
    if hard != resource.RLIM_INFINITY and hard <= value:
        return None
    resource.setrlimit(limit, (value, value))
    return value


def apply_limits(limits: Limits) -> dict[str, int]:
    """Lower this process's resource limits; returns those it set."""
    wanted = {
        "RLIMIT_AS": (resource.RLIMIT_AS, limits.address_space_bytes),
        "RLIMIT_CPU": (resource.RLIMIT_CPU, limits.cpu_seconds),
        "RLIMIT_NOFILE": (resource.RLIMIT_NOFILE, limits.open_files),
        "RLIMIT_FSIZE": (resource.RLIMIT_FSIZE, limits.file_size_bytes),
        "RLIMIT_CORE": (resource.RLIMIT_CORE, 0),
    }
    applied: dict[str, int] = {}
    for name, (limit, value) in wanted.items():
        if value is not None and _lower(limit, value) is not None:
            applied[name] = value
    return applied


def enter(spec: SandboxSpec) -> SandboxReport:
    """Enter the sandbox (see the module doc). Called first thing in the case child."""
    before = dict(os.environ)
    scrubbed = scrubbed_environment(before, spec.workdir)
    os.environ.clear()
    os.environ.update(scrubbed)
    for folder in ("tmp", ".cache"):
        (Path(spec.workdir) / folder).mkdir(exist_ok=True)
    os.chdir(spec.workdir)
    sys.argv[:] = ["kernelindex-case"]
    sys.orig_argv[:] = [sys.executable, "kernelindex-case"]
    report = SandboxReport(
        kept=sorted(scrubbed),
        dropped=len(set(before) - set(scrubbed)),
        limits=apply_limits(spec.limits),
        workdir=spec.workdir,
    )
    ENTERED[:] = [report]
    return report
