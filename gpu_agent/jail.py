"""The jail every case child runs in: bubblewrap (``bwrap``), namespaces of its own.

Why: a case child holds submitted code (a Python solution it imports, CUDA source it hands
to nvcc and launches). Run as the agent's own user, that code could read the agent's key
file, walk ``/proc`` to the agent's argv, environment and memory (the job nonce), ptrace it,
or reach the ledger. In the jail it has:

* its own user namespace, as uid/gid 65534 (``nobody``) with every capability dropped;
* its own PID namespace with a fresh ``/proc``: it sees itself and the jail's init, no
  process of the agent's;
* its own mount namespace holding only read-only system and Python paths
  (:func:`readonly_roots`: ``/usr``, the interpreter's prefix and base prefix, the import
  roots of the few project packages a case imports — never the repository, the agent's
  working directory or its home), a minimal ``/dev``, a private ``/tmp`` and one writable
  working directory the parent made for this case (mounted at :data:`WORKDIR`);
* its own network namespace (loopback only, nothing listening): no ledger, whose open jobs
  would tell the secret round's nonce, and no way out;
* its own IPC and UTS namespaces, a new session (no terminal to inject into), and death
  with its parent.

The child is *exec'd*: nothing in it was ever forked from the key holder. Where no
working bwrap exists (:func:`unavailable` probes once per process by jailing a trivial
interpreter), nothing that holds submitted code runs at all: there is no unjailed mode.

On the GPU backend the jail also gets the NVIDIA device nodes, ``/sys`` (read-only; the
driver reads PCI topology there) and the CUDA toolkit's directory, so that nvcc and the
CUDA context both live inside it.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from gpu_agent.python_solutions.sandbox import scrubbed_environment

JAIL_UID = 65534
WORKDIR = "/case"
# What a case imports of this project (gpu_agent needs domain); nothing else is mounted.
PROJECT_PACKAGES = ("gpu_agent", "domain")
PROBE_TIMEOUT_S = 60.0
NO_SANDBOX = "no sandbox available"
# System files a dynamically linked interpreter and nvcc's host compiler read.
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives")
_ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def package_root(name: str) -> Path | None:
    """The folder that holds top-level package ``name`` (or module file), without importing
    it (None when it cannot be found)."""
    import importlib.util  # noqa: PLC0415 - only when building a jail

    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).resolve()
    if spec.origin:
        return Path(spec.origin).resolve()
    return None


def import_roots(modules: Iterable[str]) -> list[Path]:
    """The package folders to mount for ``modules`` (by their top-level names), with this
    project's own packages."""
    names = dict.fromkeys([*PROJECT_PACKAGES, *(m.split(".")[0] for m in modules if m)])
    return [root for root in map(package_root, names) if root is not None]


def readonly_roots(gpu: bool) -> list[Path]:
    """Every folder the jail mounts read-only, besides the import roots."""
    roots = {Path("/usr"), Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    roots.add(Path(sys.executable).resolve().parent)
    if gpu:
        for name in ("CUDA_HOME", "CUDA_PATH"):
            if os.environ.get(name):
                roots.add(Path(os.environ[name]).resolve())
        nvcc = os.environ.get("KERNELINDEX_NVCC") or shutil.which("nvcc")
        if nvcc:
            roots.add(Path(nvcc).resolve().parent.parent)
        roots.update(
            Path(p).resolve() for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p
        )
    found = sorted(r for r in roots if r.is_dir() and r != Path("/"))
    return [r for r in found if not any(o != r and r.is_relative_to(o) for o in found)]


def _mounts(gpu: bool, modules: Iterable[str]) -> list[str]:
    args: list[str] = []
    for link in _ROOT_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for root in [*readonly_roots(gpu), *import_roots(modules)]:
        args += ["--ro-bind", str(root), str(root)]
    for path in _SYSTEM_FILES:
        args += ["--ro-bind-try", path, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]  # noqa: S108 - its own
    if gpu:
        for node in sorted(glob.glob("/dev/nvidia*")):
            args += ["--dev-bind", node, node]
        args += ["--ro-bind-try", "/sys", "/sys"]
    return args


def command(
    argv: Sequence[str], workdir: str, *, gpu: bool = False, modules: Iterable[str] = ()
) -> list[str]:
    """``argv`` run in the jail (see the module doc), ``workdir`` mounted writable at
    :data:`WORKDIR`. ``modules``: further modules the child imports (their packages are
    mounted). Raises FileNotFoundError when there is no bwrap."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise FileNotFoundError("bwrap is not on PATH")
    return [
        bwrap,
        "--unshare-all",
        "--unshare-user",  # required, not "-try": the uid below must not be the agent's
        "--uid",
        str(JAIL_UID),
        "--gid",
        str(JAIL_UID),
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        *_mounts(gpu, modules),
        "--bind",
        workdir,
        WORKDIR,
        "--chdir",
        WORKDIR,
        *_environment(),
        "--",
        *argv,
    ]


def _environment() -> list[str]:
    """``--setenv`` for the sandbox's allowlisted environment: nothing else crosses."""
    args: list[str] = []
    for name, value in sorted(scrubbed_environment(os.environ, WORKDIR).items()):
        args += ["--setenv", name, value]
    return args


def python_argv(roots: Iterable[Path], module: str, *args: str) -> list[str]:
    """The interpreter, isolated (``-I``: no PYTHON* variables, no user site, no script
    folder on the path; ``-B``: no bytecode written), running ``module`` with the parents
    of ``roots`` first on its path (only those packages are mounted in them)."""
    parents = sorted({str(root.parent) for root in roots})
    boot = (
        f"import sys, runpy; sys.path[:0] = {parents!r}; "
        f"runpy.run_module({module!r}, run_name='__main__')"
    )
    return [sys.executable, "-I", "-B", "-c", boot, *args]


@functools.cache
def unavailable() -> str | None:
    """Why no case can be jailed here (None: the jail works). Probed once per process by
    running the interpreter in the jail and checking it runs as :data:`JAIL_UID` and sees
    no process of ours."""
    if bwrap_path() is None:
        return f"{NO_SANDBOX}: bwrap (Debian package bubblewrap) is not on PATH"
    check = (
        "import os; print(os.getuid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    )
    with tempfile.TemporaryDirectory(prefix="kernelindex-jail-") as workdir:
        argv = command([sys.executable, "-I", "-c", check], workdir)
        try:
            done = subprocess.run(  # noqa: S603 - argv built here, no shell
                argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{NO_SANDBOX}: bwrap could not be run ({exc})"
    expected = f"{JAIL_UID} [1, 2]"
    if done.returncode != 0 or done.stdout.strip() != expected:
        said = (done.stderr or done.stdout).strip()[-500:]
        return f"{NO_SANDBOX}: a trivial jailed command failed (exit {done.returncode}): {said}"
    return None
