"""The jail mounts no folder that holds the agent's key, home or working directory (issue 32,
review F2 item 2).

On a GPU the jail mounts the CUDA toolkit and the library path, named by the agent's
environment. A ``KERNELINDEX_NVCC`` of ``/root/bin/nvcc`` once mounted all of ``/root``; a
relative ``LD_LIBRARY_PATH`` entry mounted the agent's working directory, where ``--key
agent.pem`` often sits. Inside the jail the files of a mounted folder are readable. Now only
the toolkit's bin, lib64, include and nvvm folders are mounted, never a relative path, and a
jail that would mount a folder holding a protected path is not started at all.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from api.cli.main import app
from gpu_agent import jail
from gpu_agent.case_child import run_case
from gpu_agent.child_process import in_child

SECRET = "-----BEGIN PRIVATE KEY-----\nnot-for-the-jail\n"
# What a solution in the jail would do with the key's path: print the file if it can.
READ_KEY = (
    "import sys\ntry:\n    print(open(sys.argv[1]).read())\nexcept OSError as e:\n    print(e)"
)


@pytest.fixture
def agent_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding a toolkit-looking bin/ and the agent's key (readable by anyone, so
    only the mount keeps it from the jail's user); the key protected as the agent does."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib64").mkdir()
    (tmp_path / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "nvcc").chmod(0o755)
    key = tmp_path / ".kernelindex" / "agent.pem"
    key.parent.mkdir()
    key.write_text(SECRET)
    key.chmod(0o644)
    for name in ("KERNELINDEX_NVCC", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(jail, "_PROTECTED", [])
    jail.protect(key)
    return tmp_path


def jailed_read(path: Path, workdir: Path) -> str:
    argv = jail.command([sys.executable, "-I", "-c", READ_KEY, str(path)], str(workdir), gpu=True)
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60).stdout


def test_nvcc_in_the_agents_folder_mounts_only_the_toolkits_folders(
    agent_folder: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("KERNELINDEX_NVCC", str(agent_folder / "bin" / "nvcc"))
    roots = jail.readonly_roots(gpu=True)
    assert agent_folder / "bin" in roots and agent_folder / "lib64" in roots
    assert agent_folder not in roots
    out = jailed_read(agent_folder / ".kernelindex" / "agent.pem", tmp_path_factory.mktemp("w"))
    assert "not-for-the-jail" not in out
    assert "No such file" in out


@pytest.mark.parametrize("variable", ["CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH"])
def test_a_mount_that_would_hold_the_key_refuses_the_jail(
    agent_folder: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    key = agent_folder / "lib64" / "agent.pem"  # the key inside a folder that is mounted
    key.write_text(SECRET)
    jail.protect(key)
    where = agent_folder / "lib64" if variable == "LD_LIBRARY_PATH" else agent_folder
    monkeypatch.setenv(variable, str(where))
    with pytest.raises(jail.UnsafeMount, match=r"agent\.pem"):
        jail.command(["/bin/true"], "/nonexistent", gpu=True)


def test_a_gpu_case_is_not_started_when_its_jail_would_hold_the_key(
    agent_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's failure, named: no child is started, no case is signed."""
    jail.protect(agent_folder / "bin" / "agent.pem")
    monkeypatch.setenv("KERNELINDEX_NVCC", str(agent_folder / "bin" / "nvcc"))
    child = in_child(run_case, SimpleNamespace(backend_name="pycuda"), 60, sandboxed=True)
    assert child.kind == "agent-error"
    assert "no sandbox available" in child.value and "agent.pem" in child.value


def test_the_agents_home_or_working_directory_is_never_mounted(
    agent_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(agent_folder / "lib64" / "home"))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(agent_folder / "lib64"))
    with pytest.raises(jail.UnsafeMount, match="home"):
        jail.readonly_roots(gpu=True)
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.chdir(agent_folder / "lib64")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(agent_folder / "lib64"))
    with pytest.raises(jail.UnsafeMount, match="lib64"):
        jail.readonly_roots(gpu=True)


def test_relative_paths_are_never_mounted(
    agent_folder: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``--key agent.pem`` in the working directory, ``LD_LIBRARY_PATH=.:lib64``: neither the
    folder nor the key is in the jail (and the jail still starts)."""
    monkeypatch.chdir(agent_folder)
    monkeypatch.setenv("LD_LIBRARY_PATH", ".:lib64:.kernelindex")
    monkeypatch.setenv("KERNELINDEX_NVCC", "bin/nvcc")
    roots = jail.readonly_roots(gpu=True)
    assert not any(root.is_relative_to(agent_folder) for root in roots)
    out = jailed_read(agent_folder / ".kernelindex" / "agent.pem", tmp_path_factory.mktemp("w"))
    assert "not-for-the-jail" not in out


def test_the_agent_command_protects_its_key_before_anything_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kernelindex agent --key FILE`` protects FILE from every jail before it even loads
    the key (here a missing file: the command fails, the protection is already set)."""
    monkeypatch.setattr(jail, "_PROTECTED", [])
    key = tmp_path / "keys" / "agent.pem"
    args = ["agent", "--server", "http://127.0.0.1:9", "--key", str(key), "--once"]
    result = CliRunner().invoke(app, [*args, "--backend", "cpu-test"])
    assert result.exit_code != 0
    assert key.resolve() in jail.protected_paths()
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "keys"))
    key.parent.mkdir()
    with pytest.raises(jail.UnsafeMount, match=r"agent\.pem"):
        jail.readonly_roots(gpu=True)
