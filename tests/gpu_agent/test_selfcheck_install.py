"""gpu_agent/selfcheck.sh installs enough for the self-check to start on a bare GPU machine.

The script makes importable the Python packages its ``DIST`` map names (and pip brings their
requirements). This test builds a site directory holding exactly those distributions and
their requirement closure — linked from this environment — and runs the self-check under
``python -S`` (no site-packages) with only that directory and the repository on the path:
``--help``, the modules every case child imports, and one sample end to end on the CPU
backend (whose spawned children inherit ``-S``). An import the script does not provide for
(ruamel.yaml through ledger/signing/authoring → dsse → domain/documents, say) fails it.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "gpu_agent" / "selfcheck.sh"
WHEELS_README = REPO / "gpu_agent" / "wheels" / "README.md"
# What a case child and the self-check import (PyCUDA itself is installed apart, by name).
ENTRY_MODULES = (
    "gpu_agent.selfcheck",
    "gpu_agent.case_child",
    "gpu_agent.backends.pycuda_backend",
    "gpu_agent.backends.crosscheck",
    "gpu_agent.references",
)


def declared_distributions() -> list[str]:
    """The distribution names of selfcheck.sh's ``DIST=( [module]=distribution ... )`` map."""
    text = SCRIPT.read_text("utf-8")
    block = re.search(r"declare -A DIST=\((.*?)\n\)", text, re.S)
    assert block is not None, "selfcheck.sh has no DIST map"
    return re.findall(r"\[[\w.]+\]=([\w.\-]+)", block.group(1))


def requirement_closure(names: list[str]) -> set[str]:
    """The distributions ``names`` need installed, transitively (extras left out)."""
    environment = {k: str(v) for k, v in default_environment().items()}
    todo, seen = list(names), set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.distribution(name).requires or []:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is None or marker.evaluate({**environment, "extra": ""}):
                todo.append(requirement.name)
    return seen


def site_of(distributions: set[str], target: Path) -> Path:
    """A directory holding links to exactly these distributions' files (as pip --target)."""
    for name in distributions:
        dist = metadata.distribution(name)
        root = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            link = target / top
            if not link.exists() and (root / top).exists():
                link.symlink_to(root / top)
    return target


@pytest.fixture(scope="module")
def bare_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return site_of(requirement_closure(declared_distributions()), tmp_path_factory.mktemp("site"))


def _run_bare(site: Path, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = f"{site}{os.pathsep}{REPO}"
    return subprocess.run(
        [sys.executable, "-S", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_bare_site_really_is_bare(bare_site: Path) -> None:
    # Proof the environment is what the script installs: a project dependency it does not
    # install (sqlalchemy, the store's) is not importable there.
    done = _run_bare(bare_site, "-c", "import sqlalchemy")
    assert done.returncode != 0 and "No module named 'sqlalchemy'" in done.stderr


def test_every_agent_module_imports_with_what_selfcheck_sh_installs(bare_site: Path) -> None:
    done = _run_bare(bare_site, "-c", "; ".join(f"import {m}" for m in ENTRY_MODULES))
    assert done.returncode == 0, done.stderr
    help_run = _run_bare(bare_site, "-m", "gpu_agent.selfcheck", "--help")
    assert help_run.returncode == 0, help_run.stderr
    assert "--deadline-s" in help_run.stdout


def test_one_sample_runs_end_to_end_with_what_selfcheck_sh_installs(
    bare_site: Path, tmp_path: Path
) -> None:
    done = _run_bare(
        bare_site,
        "-m",
        "gpu_agent.selfcheck",
        "--backend",
        "cpu-test",
        "--quick",
        "--cases",
        "1",
        "--max-axis",
        "8",
        "--samples",
        "rmsnorm_h4096_bf16",
        "--table",
        str(tmp_path / "table.txt"),
    )
    assert done.returncode == 0, done.stdout + done.stderr  # signing included
    assert "1/1 samples as expected" in done.stdout


def test_the_wheels_readme_downloads_every_declared_distribution() -> None:
    text = WHEELS_README.read_text("utf-8").lower()
    missing = [
        n
        for n in declared_distributions()
        if canonicalize_name(n) not in {canonicalize_name(w) for w in re.findall(r"[\w.\-]+", text)}
    ]
    assert missing == []
