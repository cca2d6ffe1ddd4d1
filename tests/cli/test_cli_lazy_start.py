"""What a read command loads, so that its start-up does not regress silently.

DESIGN.md §13: a read command starts within 0.5 s (``benchmarks/bench_cli.py``, figure
``startup``), and most of that time is imports. Each manifest kind's pydantic model is made
only when a manifest of that kind is validated (``domain.manifests.models`` imports a kind's
module on first use), and the progress bars only by the commands that show one. A timing
would be noise on a shared machine; which modules a process holds is exact.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from api.demo import COHORT_FILE, _data, seed_manifests
from domain.manifests.kinds import MANIFEST_KINDS
from domain.manifests.models import MODULES

REPO = Path(__file__).resolve().parents[2]
SEED = "sol-submission-38823"  # the demo's seed run, by name
MODELS = "domain.manifests.models"
DEMO = [sys.executable, "-m", "api.cli", "demo"]

# Loads the command argv names as main() does (and with "run" runs it in-process), then prints
# the modules it loaded, as JSON.
PROBE = """\
import json, sys
from api.cli.main import app, preload
argv = sys.argv[2:]
preload(argv)
code = app(argv, standalone_mode=False) if sys.argv[1] == "run" else 0
print("LOADED" + json.dumps(sorted(sys.modules)))
sys.exit(code if isinstance(code, int) else 0)
"""


def _loaded(env: dict[str, str], mode: str, *argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode, *argv],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.rsplit("LOADED", 1)[1]))


def _kind_modules(loaded: set[str]) -> set[str]:
    return {m.removeprefix(MODELS + ".") for m in loaded if m.startswith(MODELS + ".")}


@pytest.fixture(scope="module")
def demo_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("lazy-start")
    env = {
        **os.environ,
        "KERNELINDEX_HOME": str(root / "home"),
        "KERNELINDEX_DB": f"sqlite:///{root / 'ledger.db'}",
    }
    subprocess.run(
        [*DEMO, "--home", env["KERNELINDEX_HOME"], "--db", env["KERNELINDEX_DB"]],
        env=env,
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    return env


def test_each_kind_names_the_module_that_defines_it() -> None:
    assert set(MODULES) == set(MANIFEST_KINDS)
    probe = (
        "import importlib, sys\n"
        "from domain.manifests import models\n"
        "for kind, module in models.MODULES.items():\n"
        "    cls = getattr(importlib.import_module(f'domain.manifests.models.{module}'), kind)\n"
        "    assert getattr(models, kind) is cls and cls.__name__ == kind, kind\n"
        "from domain.manifests.models import *  # noqa: F403\n"
        "assert 'ServingRun' in dir(models)\n"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=REPO, check=True)


def test_manifest_models_imports_a_kind_only_when_it_is_looked_up() -> None:
    probe = """\
import json, sys
from domain.manifests.registry import manifest_models
def kinds():
    return sorted(m.rsplit(".", 1)[1] for m in sys.modules
                  if m.startswith("domain.manifests.models."))
found = {}
models = manifest_models()
assert len(models) == 13 and "ServingRun" in models and "Nope" not in models
assert models.get("Nope") is None and models.get("__class__") is None
found["asked nothing"] = kinds() + [str(list(models))]
found["ServingRun"] = [models["ServingRun"].__name__, *kinds()]
found["all"] = [len(dict(models.items())), *kinds()]
print(json.dumps(found))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout)
    assert found["asked nothing"] == [str(list(MANIFEST_KINDS))]
    assert found["ServingRun"] == ["ServingRun", "common", "serving_run"]
    assert found["all"] == [13, *sorted(["common", *MODULES.values()])]


@pytest.mark.parametrize(
    "argv",
    [
        ["show", SEED],
        ["history", SEED],
        ["leaderboard", "sha256:0123"],
        ["search", "B200"],
    ],
)
def test_a_read_commands_start_up_makes_no_manifest_model_and_no_progress_bar(
    argv: list[str],
) -> None:
    loaded = _loaded(dict(os.environ), "build", *argv)
    assert not {m for m in loaded if m.startswith((MODELS, "rich.progress"))}, argv


def test_show_and_history_make_no_manifest_model_though_they_verify(
    demo_env: dict[str, str],
) -> None:
    # They re-verify the seed's events (its manifests and the workload it names), but take
    # the digests of manifests admission validated without the schema gate
    # (``admitted_manifest_digest``): no kind's model is made.
    assert seed_manifests() and _data(COHORT_FILE)["seedWorkload"]["kind"] in MODULES
    for command in ("show", "history"):
        loaded = _loaded(demo_env, "run", command, SEED)
        assert _kind_modules(loaded) == set(), command
        assert "rich.progress" not in loaded, command
        # A ledger on SQLite reads without PostgreSQL's dialect module (~20 ms to import).
        assert "sqlalchemy.dialects.postgresql" not in loaded, command
    board = _loaded(demo_env, "run", "leaderboard", "--gpu", "NVIDIA B200")
    assert not {m for m in board if m.startswith((MODELS, "rich.progress"))}
