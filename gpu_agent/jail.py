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
driver reads PCI topology there), the CUDA toolkit's ``bin``, ``lib64``, ``include`` and
``nvvm`` folders (never its root, which the environment names: ``KERNELINDEX_NVCC=/root/bin/nvcc``
once mounted ``/root``) and the absolute entries of ``LD_LIBRARY_PATH``, so that nvcc and the
CUDA context both live inside it. No relative path is ever mounted, and a jail that would
mount a folder holding the agent's key file (:func:`protect`), home or working directory is
not started (:class:`UnsafeMount`, the agent's failure): inside the jail the agent's files
are readable by the jailed user.
"""

from __future__ import annotations

import contextlib
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


# The CUDA toolkit's folders nvcc and a CUDA context need: never the toolkit's whole root,
# which may be any folder (a KERNELINDEX_NVCC of /root/bin/nvcc names /root).
TOOLKIT_FOLDERS = ("bin", "lib64", "include", "nvvm")
# (source on the host, where it appears in the jail): the same path, but for a toolkit
# folder that is a symlink (lib64 → targets/…/lib), also bound at the symlink's path.
Mount = tuple[Path, Path]

# Paths no mounted folder may hold, besides the agent's home and working directory: the
# agent's key file, told by the agent at start (:func:`protect`). Process-wide: one agent,
# one key.
_PROTECTED: list[Path] = []


class UnsafeMount(Exception):
    """A folder the jail would mount holds the agent's key, home or working directory."""


def protect(path: str | os.PathLike[str]) -> None:
    """Refuse every jail that would mount a folder holding ``path`` (the agent's key file;
    the agent calls this once at start, before any case)."""
    _PROTECTED.append(Path(path).resolve())


def library_paths() -> list[Path]:
    """The agent's own import path entries that hold its dependencies (a venv's or a private
    ``pip --target`` folder's site-packages, as selfcheck.sh makes): absolute folders holding
    none of this project's packages (those are mounted one by one, never their parent, which
    may be a checkout with a key in it) and no protected path. The jail's ``-I`` interpreter
    ignores PYTHONPATH, so these are mounted and put on its path explicitly."""
    protected = protected_paths()
    found: list[Path] = []
    for text in sys.path:
        if not text or not os.path.isabs(text) or not os.path.isdir(text):
            continue
        entry = Path(text).resolve()
        if any(
            (entry / name).exists() or (entry / f"{name}.py").exists() for name in PROJECT_PACKAGES
        ) or any(p.is_relative_to(entry) for p in protected):
            continue
        # A folder of links to installed distributions: where they point must be there too.
        linked = {Path(e.path).resolve().parent for e in os.scandir(entry) if e.is_symlink()}
        for folder in [entry, *sorted(linked)]:
            if folder not in found and not any(p.is_relative_to(folder) for p in protected):
                found.append(folder)
    return found


def protected_paths() -> list[Path]:
    """The agent's key file(s), home and working directory, resolved."""
    paths = list(_PROTECTED)
    with contextlib.suppress(OSError, RuntimeError):  # no HOME and no passwd entry
        paths.append(Path.home().resolve())
    with contextlib.suppress(OSError):
        paths.append(Path.cwd().resolve())
    return paths


def _absolute(text: str | None) -> Path | None:
    """``text`` as a path, or None when it is empty or relative: a relative path would be
    resolved against the agent's working directory, where its key often sits."""
    if not text or not os.path.isabs(text):
        return None
    return Path(os.path.normpath(text))


def _toolkit(root: Path) -> list[Mount]:
    mounts: list[Mount] = []
    for name in TOOLKIT_FOLDERS:
        folder = root / name
        if folder.is_dir():
            real = folder.resolve()
            mounts.append((real, real))
            if real != folder:
                mounts.append((real, folder))
    return mounts


def readonly_mounts(gpu: bool) -> list[Mount]:
    """Every read-only mount of the jail, besides the import roots: system and Python paths,
    and on a GPU the CUDA toolkit's folders and the library path's absolute entries.
    UnsafeMount when one of them holds a path of :func:`protected_paths`."""
    roots = {Path("/usr"), Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    roots.add(Path(sys.executable).resolve().parent)
    # The interpreter as the agent names it (a venv's bin/python3 is a symlink; under
    # ``python -S`` the venv is not sys.prefix), and the folders its dependencies live in.
    roots.add(Path(sys.executable).absolute().parent)
    roots.update(library_paths())
    extra: list[Mount] = []
    if gpu:
        toolkits = [_absolute(os.environ.get(name)) for name in ("CUDA_HOME", "CUDA_PATH")]
        nvcc = _absolute(os.environ.get("KERNELINDEX_NVCC") or shutil.which("nvcc"))
        toolkits.append(nvcc.parent.parent if nvcc is not None else None)
        for toolkit in filter(None, toolkits):
            extra += _toolkit(toolkit)
        for entry in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
            folder = _absolute(entry)
            if folder is not None:
                roots.add(folder.resolve())
    roots.update(source for source, target in extra if source == target)
    found = sorted(r for r in roots if r.is_dir() and r != Path("/"))
    kept = [r for r in found if not any(o != r and r.is_relative_to(o) for o in found)]
    # A symlinked toolkit folder already visible through a kept root needs no bind of its own.
    links = sorted(
        {(s, t) for s, t in extra if s != t and not any(t.is_relative_to(r) for r in kept)}
    )
    mounts = [(r, r) for r in kept] + links
    refuse_unsafe(source for source, _ in mounts)
    return mounts


def readonly_roots(gpu: bool) -> list[Path]:
    """The host folders the jail mounts read-only, besides the import roots."""
    return sorted({source for source, _ in readonly_mounts(gpu)})


def refuse_unsafe(sources: Iterable[Path]) -> None:
    """UnsafeMount when a folder of ``sources`` is, or holds, a protected path."""
    protected = protected_paths()
    for source in sources:
        held = [p for p in protected if p.is_relative_to(source)]
        if held:
            raise UnsafeMount(
                f"the jail would mount {source}, which holds {held[0]} (the agent's key, home "
                "or working directory); point CUDA_HOME, KERNELINDEX_NVCC and LD_LIBRARY_PATH "
                "at folders that hold none of them, and run the agent elsewhere"
            )


def _mounts(gpu: bool, modules: Iterable[str]) -> list[str]:
    # The private /tmp first: a folder mounted below it (selfcheck.sh's private site under
    # /tmp) must land on top of it, not be hidden by it.
    args: list[str] = ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]  # noqa: S108
    for link in _ROOT_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    roots = import_roots(modules)
    refuse_unsafe(roots)
    for source, target in [*readonly_mounts(gpu), *((r, r) for r in roots)]:
        args += ["--ro-bind", str(source), str(target)]
    for path in _SYSTEM_FILES:
        args += ["--ro-bind-try", path, path]
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
    mounted). Raises FileNotFoundError when there is no bwrap, UnsafeMount when a folder it
    would mount holds the agent's key, home or working directory."""
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
    parents += [str(entry) for entry in library_paths() if str(entry) not in parents]
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
        try:
            argv = command([sys.executable, "-I", "-c", check], workdir)
        except UnsafeMount as exc:
            return f"{NO_SANDBOX}: {exc}"
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
