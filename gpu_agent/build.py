"""Compiling a solution's CUDA C++ for one exact GPU architecture with nvcc (docs/design.md §11).

The agent builds every solution the same way: one ``nvcc`` invocation on the entry-point file,
for the device's exact target (machine code only, no PTX for the driver to JIT), with the
pinned flags :data:`NVCC_FLAGS`. The flags a solution asks for (``spec.compile_options``) are
not used: a rerun measures the submitted source under one recorded toolchain setting, so two
reruns of the same solution on the same architecture build the same cubin.

**Target.** :func:`target_architecture` maps the device's compute capability to
``sm_XY`` plus the ``a`` suffix where the architecture has arch-specific features
(:data:`ARCH_SPECIFIC`: 9.0, 10.0, 10.1, 10.3, 11.0, 12.0, 12.1 — nvcc's documented list).
Hopper and Blackwell kernels that use wgmma, TMA multicast or setmaxnreg only compile for
``sm_90a`` / ``sm_100a``; an ``a`` cubin runs on exactly that architecture, which is all a
rerun needs, and everything that builds for ``sm_XY`` builds for ``sm_XYa``.

**Whose fault.** :class:`BuildError` says whether the agent or the submission is at fault
(``agent_fault``): a missing or broken nvcc, a missing host compiler or a toolchain too old
for the device is the agent's; a submission that does not compile (or makes nvcc hang) is
the submission's. When nvcc fails, :func:`toolchain_works` compiles a trivial kernel with the
same flags for the same target: if that fails too, the toolchain is broken and the failure
is the agent's; if it builds, the submission's source is what nvcc refused.

``--use_fast_math`` is deliberately absent (SOL-ExecBench's default has it): it changes the
numerics of every division, square root and transcendental, flushes denormals, and would make
the recorded correctness depend on a flag the source does not show. A kernel that wants fast
intrinsics can call them explicitly (``__expf``, ``rsqrtf``...), which is visible in its source.

Nothing here touches the GPU or imports a CUDA binding: this module runs (and is tested) on any
machine that has ``nvcc``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gpu_agent.backends.base import BackendError

# Pinned, in this order, after ``-cubin -arch=sm_XY``; recorded with every result.
NVCC_FLAGS: tuple[str, ...] = ("-O3", "-std=c++17", "-lineinfo")

# Compute capabilities (major, minor) with an arch-specific ``sm_XYa`` target, as nvcc
# documents them (CUDA 12.0: 9.0; 12.8: 10.0, 10.1, 12.0; 12.9: 10.3, 12.1; 13.0: 11.0, the
# renamed 10.1). A device outside this set is built for plain ``sm_XY``.
ARCH_SPECIFIC: frozenset[tuple[int, int]] = frozenset(
    {(9, 0), (10, 0), (10, 1), (10, 3), (11, 0), (12, 0), (12, 1)}
)

DEFAULT_TIMEOUT_S = 180.0
PROBE_TIMEOUT_S = 120.0
# How much of nvcc's output an error message keeps (the end, where the errors are).
MAX_LOG_CHARS = 8000

_ARCH = re.compile(r"sm_(\d{2,3})([af]?)")
_SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".hh", ".inc", ".cpp", ".cc")
# The trivial kernel the toolchain must build when a submission does not (see toolchain_works).
PROBE_SOURCE = 'extern "C" __global__ void kernelindex_probe(int* p) { p[threadIdx.x] = 1; }\n'


class BuildError(BackendError):
    """nvcc is missing, refused the input, failed or timed out; ``log`` holds its output.

    ``agent_fault`` says whose failure it is: True for the agent's toolchain (no nvcc, no host
    compiler, a target nvcc does not know), False for the submission's source."""

    def __init__(self, message: str, log: str = "", *, agent_fault: bool = False) -> None:
        whose = "agent toolchain failure" if agent_fault else "the submission does not build"
        text = f"{whose}: {message}"
        super().__init__(f"{text}\n{log}" if log else text)
        self.log = log
        self.agent_fault = agent_fault


@dataclass(frozen=True)
class BuildResult:
    """A built cubin and exactly how it was built."""

    cubin: bytes
    architecture: str  # the target built for: "sm_90a"
    entry_file: str  # the compiled source file, e.g. "kernel.cu"
    function: str  # the extern "C" __global__ symbol to load
    flags: tuple[str, ...]  # every nvcc argument except file names, in order
    nvcc_version: str  # "13.0.88"
    log: str  # nvcc's (bounded) output, warnings included
    seconds: float


def target_architecture(major: int, minor: int) -> str:
    """The exact nvcc target for a device of compute capability ``major.minor``.

    ``sm_XYa`` where the architecture has arch-specific features (:data:`ARCH_SPECIFIC`),
    else ``sm_XY``."""
    if major < 1 or not 0 <= minor <= 9:
        raise BuildError(f"compute capability {major}.{minor} is not one", agent_fault=True)
    suffix = "a" if (major, minor) in ARCH_SPECIFIC else ""
    return f"sm_{major}{minor}{suffix}"


def nvcc_path() -> str | None:
    """The nvcc to use: ``$KERNELINDEX_NVCC``, else ``nvcc`` on PATH, else under CUDA_HOME."""
    explicit = os.environ.get("KERNELINDEX_NVCC")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    return None


def nvcc_version(nvcc: str | None = None) -> str:
    """``nvcc --version``'s release, e.g. ``"13.0.88"``; BuildError if nvcc is missing."""
    return _nvcc_version(_require_nvcc(nvcc))


@functools.lru_cache(maxsize=8)
def _nvcc_version(exe: str) -> str:
    try:
        out = subprocess.run(  # noqa: S603 - a fixed argv, no shell
            [exe, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"cannot run {exe} --version: {exc}", agent_fault=True) from exc
    match = re.search(r"V(\d+\.\d+\.\d+)", out.stdout)
    if match is None:
        raise BuildError(
            f"cannot read the version of {exe}",
            _bounded(out.stdout + out.stderr),
            agent_fault=True,
        )
    return match.group(1)


def check_architecture(architecture: str) -> str:
    """``architecture`` if it names one exact target (``sm_90``, ``sm_90a``, ``sm_100``...).

    The target comes from the device, never from the submission: a bad one is the agent's."""
    if _ARCH.fullmatch(architecture) is None:
        raise BuildError(
            f"architecture {architecture!r} is not an exact target like 'sm_90' or 'sm_100a'",
            agent_fault=True,
        )
    return architecture


def split_entry_point(entry_point: str, sources: dict[str, str]) -> tuple[str, str]:
    """``"kernel.cu::rmsnorm"`` → ``("kernel.cu", "rmsnorm")``.

    A bare function name is accepted when the sources hold exactly one ``.cu`` file.
    """
    if "::" in entry_point:
        file, _, function = entry_point.rpartition("::")
    else:
        cu_files = sorted(path for path in sources if path.endswith(".cu"))
        if len(cu_files) != 1:
            raise BuildError(
                f"entry point {entry_point!r} names no file and the sources hold "
                f"{len(cu_files)} .cu files; write it as 'file.cu::function'"
            )
        file, function = cu_files[0], entry_point
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", function):
        raise BuildError(f"entry point function {function!r} is not a C identifier")
    if file not in sources:
        raise BuildError(f"entry point file {file!r} is not among the sources {sorted(sources)}")
    if not file.endswith(".cu"):
        raise BuildError(f"entry point file {file!r} is not a .cu file")
    return file, function


def nvcc_command(
    nvcc: str, architecture: str, entry_file: Path, output: Path, include_dir: Path
) -> list[str]:
    """The full nvcc argument vector (see :func:`build_flags` for the recorded part)."""
    return [
        nvcc,
        *build_flags(architecture),
        f"-I{include_dir}",
        "-o",
        str(output),
        str(entry_file),
    ]


def build_flags(architecture: str) -> tuple[str, ...]:
    """The recorded flags for ``architecture``: every argument except paths."""
    return ("-cubin", f"-arch={check_architecture(architecture)}", *NVCC_FLAGS)


def compile_cubin(
    sources: dict[str, str],
    entry_point: str,
    architecture: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    nvcc: str | None = None,
) -> BuildResult:
    """Build the entry-point file of ``sources`` to a cubin for exactly ``architecture``.

    All sources are written to a fresh temporary directory (which is also on the include
    path), so the entry file may ``#include`` the others; only the entry file is compiled.
    """
    exe = _require_nvcc(nvcc)
    check_architecture(architecture)
    entry_file, function = split_entry_point(entry_point, sources)
    version = nvcc_version(exe)
    with tempfile.TemporaryDirectory(prefix="kernelindex-build-") as tmp:
        root = Path(tmp) / "src"
        _write_sources(root, sources)
        output = Path(tmp) / "kernel.cubin"
        command = nvcc_command(exe, architecture, root / entry_file, output, root)
        started = time.monotonic()
        done = _run_nvcc(command, root, timeout_s, f"building {entry_file}")
        seconds = time.monotonic() - started
        log = _bounded(done.stdout + done.stderr) if done is not None else ""
        if done is None or done.returncode != 0 or not output.is_file():
            raise _failure(exe, architecture, entry_file, done, log, timeout_s)
        cubin = output.read_bytes()
    return BuildResult(
        cubin=cubin,
        architecture=architecture,
        entry_file=entry_file,
        function=function,
        flags=build_flags(architecture),
        nvcc_version=version,
        log=log,
        seconds=seconds,
    )


def _write_sources(root: Path, sources: dict[str, str]) -> None:
    root.mkdir()
    for name, text in sources.items():
        target = root / _safe_relative(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _run_nvcc(
    command: list[str], cwd: Path, timeout_s: float, what: str
) -> subprocess.CompletedProcess[str] | None:
    """nvcc's completed process; None when it ran past ``timeout_s``.

    OSError (nvcc cannot even be started) is the agent's fault at once."""
    try:
        return subprocess.run(  # noqa: S603 - argv built here, no shell
            command, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return None
    except OSError as exc:
        raise BuildError(f"cannot run nvcc ({command[0]}) {what}: {exc}", agent_fault=True) from exc


def _failure(
    exe: str,
    architecture: str,
    entry_file: str,
    done: subprocess.CompletedProcess[str] | None,
    log: str,
    timeout_s: float,
) -> BuildError:
    """The BuildError for a failed build, blaming the toolchain only if it is broken."""
    if done is None:
        what = f"nvcc did not finish within {timeout_s:g} s building {entry_file}"
    else:
        what = f"nvcc failed (exit {done.returncode}) building {entry_file} for {architecture}"
    healthy, probe_log = toolchain_works(exe, architecture)
    if not healthy:
        return BuildError(
            f"{what}, and it cannot build a trivial kernel for {architecture} either "
            "(no host compiler, or a toolchain that does not know this target)",
            probe_log or log,
            agent_fault=True,
        )
    return BuildError(what, log)


@functools.lru_cache(maxsize=8)
def toolchain_works(exe: str, architecture: str) -> tuple[bool, str]:
    """``(ok, log)``: can ``exe`` build :data:`PROBE_SOURCE` with the pinned flags for
    ``architecture``? Asked only after a submission failed to build (one extra nvcc run)."""
    with tempfile.TemporaryDirectory(prefix="kernelindex-probe-") as tmp:
        root = Path(tmp) / "src"
        _write_sources(root, {"probe.cu": PROBE_SOURCE})
        output = Path(tmp) / "probe.cubin"
        command = nvcc_command(exe, architecture, root / "probe.cu", output, root)
        try:
            done = _run_nvcc(command, root, PROBE_TIMEOUT_S, "building the probe kernel")
        except BuildError as exc:
            return False, str(exc)
        if done is None:
            return False, f"nvcc did not build the probe kernel within {PROBE_TIMEOUT_S:g} s"
        return done.returncode == 0 and output.is_file(), _bounded(done.stdout + done.stderr)


def _require_nvcc(nvcc: str | None) -> str:
    exe = nvcc or nvcc_path()
    if exe is None:
        raise BuildError(
            "nvcc not found: put the CUDA toolkit's bin directory on PATH, "
            "or set KERNELINDEX_NVCC or CUDA_HOME",
            agent_fault=True,
        )
    return exe


def _safe_relative(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if (
        not name
        or path.is_absolute()
        or "\\" in name
        or any(part in ("", ".", "..") for part in name.split("/"))
    ):
        raise BuildError(f"source path {name!r} must be relative, without '.' or '..' parts")
    if not name.endswith(_SOURCE_SUFFIXES):
        raise BuildError(f"source {name!r} is not a CUDA C++ source or header ({_SOURCE_SUFFIXES})")
    return path


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _bounded(log: str) -> str:
    log = log.strip()
    if len(log) <= MAX_LOG_CHARS:
        return log
    return f"[... {len(log) - MAX_LOG_CHARS} characters cut ...]\n" + log[-MAX_LOG_CHARS:]
