"""``kernelindex verify`` without Typer (issue 33) says what it says with Typer.

The command reads a plain command line itself, from the parameter table Typer's command is
built from (api/cli/verify.py ``PARAMETERS``, api/cli/options.py), and hands Typer anything
else. Held here two ways:

- the values: over generated argument vectors, whatever the fast parse takes, Typer (its
  parse and coercion, the command's own function spied on) calls the command with the same
  values; a set of well-formed vectors is taken (the fast start is used at all);
- the whole output: over a sweep of argument vectors (verdicts, ``--json``, refusals, bad,
  unknown, missing and repeated options, ``--``, ``--help``), the real process gives the same
  stdout, stderr and exit code with the fast start as with Typer alone, and loads Typer only
  for what the fast start does not take.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer._click.exceptions import ClickException

import api.cli.verify
from api.cli.options import parse
from api.cli.verify import PARAMETERS

REPO = Path(__file__).resolve().parents[2]
SEED = "sol-submission-38823"  # the demo's seed run, by name
KERNELINDEX = [sys.executable, "-m", "api.cli"]

# The words the argument vectors are made of: every option, with values well-formed and
# not for its kind, and what a parser must not take for a value or an option.
NUMBERS = ["1", "2", "0", "-1", "+2", " 3", "1_0", "٣", "x", ""]
VALUES: dict[str, list[str]] = {
    "--rank": NUMBERS,
    "--workers": NUMBERS,
    "--view": ["verified", "source-native", "VERIFIED", "x", ""],
    "--run": ["sol-submission", "x", "", "--json"],
    "--min-level": ["reported", "bogus", ""],
}
FLAGS = ["--unsafe-trust-bundle-root", "--json"]
PATH_OPTIONS = ["--trust-root", "--checkpoint", "--policy"]
ODD = ["--help", "--", "-", "-h", "--bogus", "--json=1", "--rank=2", "--no-json", "--trust"]


def _typer_values(args: list[str]) -> dict[str, Any] | None:
    """The values Typer calls the command with for ``args`` (None: it refuses them)."""
    called: list[dict[str, Any]] = []

    def spy(**values: Any) -> int:
        called.append(values)
        return 0

    command = typer.main.get_command(api.cli.verify.app)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api.cli.verify, "verified", spy)
        try:
            command.main(list(args), prog_name="kernelindex verify", standalone_mode=False)
        except (typer.Exit, typer.Abort, ClickException):
            return None
    return called[0] if called else None


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Paths for the vectors: two readable files, a directory, one that is not there."""
    root = tmp_path_factory.mktemp("verify-fast")
    for name in ("bundle.jsonl", "root.json"):
        (root / name).write_text("{}\n", "utf-8")
    return [str(root / "bundle.jsonl"), str(root / "root.json"), str(root), str(root / "gone")]


def test_well_formed_command_lines_are_read_without_typer(paths: list[str]) -> None:
    bundle, root = paths[0], paths[1]
    taken = [
        [bundle],
        [bundle, "--trust-root", root],
        ["--trust-root", root, bundle, "--json"],
        [bundle, "--checkpoint", root, "--checkpoint", bundle, "--run", "x", "--rank", "2"],
        [bundle, "--view", "verified", "--workers", "1", "--min-level", "reported"],
        [bundle, "--unsafe-trust-bundle-root", "--json", "--json", "--policy", root],
        [bundle, "--run", "a", "--run", "b"],  # the last one given, as Click takes it
    ]
    for args in taken:
        values = parse(PARAMETERS, args)
        assert values is not None, args
        assert values == _typer_values(args), args


@settings(max_examples=400)
@given(data=st.data())
def test_whatever_the_fast_parse_takes_typer_reads_the_same(
    data: st.DataObject, paths: list[str]
) -> None:
    # Mostly options with values of their kind, and one path for the bundle; now and then
    # an odd word, a missing value or a second path.
    option = st.one_of(
        st.sampled_from(FLAGS).map(lambda flag: [flag]),
        st.sampled_from(PATH_OPTIONS).flatmap(
            lambda name: st.sampled_from(paths).map(lambda path: [name, path])
        ),
        st.sampled_from(sorted(VALUES)).flatmap(
            lambda name: st.sampled_from(VALUES[name]).map(lambda value: [name, value])
        ),
    )
    odd = st.sampled_from([*ODD, *PATH_OPTIONS, *VALUES, *paths]).map(lambda w: [w])
    pieces = data.draw(st.lists(st.one_of(option, option, option, odd), max_size=5))
    bundle = data.draw(st.sampled_from([[], [paths[0]], [paths[0]], [paths[2]], paths[:2]]))
    at = data.draw(st.integers(0, len(pieces)))
    args = [word for piece in [*pieces[:at], bundle, *pieces[at:]] for word in piece]
    values = parse(PARAMETERS, args)
    if values is not None:
        assert values == _typer_values(args), args


# Runs the entry point as the console script does (``typer`` as the first argument: with the
# fast start switched off, Typer alone), and lists the modules the process held at its end.
ENTRY_POINT = """\
import json, os, sys
listing, mode, end = sys.argv[1], sys.argv[2], os._exit
def exit_after_listing(code):
    with open(listing, "w") as handle:
        json.dump(sorted(sys.modules), handle)
    end(code)
os._exit = exit_after_listing
sys.argv = ["kernelindex", *sys.argv[3:]]
if mode == "typer":
    import api.cli.verify
    api.cli.verify.fast_main = lambda args: None
from api.cli.main import main
main()
"""


def _run(mode: str, argv: list[str], env: dict[str, str], tmp_path: Path) -> tuple[Any, bool]:
    """(exit code, stdout, stderr) of ``kernelindex ARGV``, and whether Typer was loaded."""
    listing = tmp_path / f"{mode}.json"
    listing.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", ENTRY_POINT, str(listing), mode, *argv],
        cwd=REPO,
        env={**env, "COLUMNS": "100"},
        capture_output=True,
        check=False,
    )
    assert listing.exists(), done.stderr[-2000:]
    return (done.returncode, done.stdout, done.stderr), "typer" in json.loads(listing.read_text())


def test_the_fast_start_and_typer_print_the_same(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("verify-sweep")
    env = {
        **os.environ,
        "KERNELINDEX_HOME": str(root / "home"),
        "KERNELINDEX_DB": f"sqlite:///{root / 'ledger.db'}",
    }
    bundle = str(root / "seed.bundle.jsonl")
    for argv in (
        ["demo", "--home", env["KERNELINDEX_HOME"], "--db", env["KERNELINDEX_DB"]],
        ["export", "--run", SEED, "-o", bundle],
    ):
        subprocess.run([*KERNELINDEX, *argv], env=env, cwd=REPO, check=True, capture_output=True)
    trust = str(root / "home" / "trust-root.json")
    lines = Path(bundle).read_text("utf-8").splitlines()
    tampered = root / "tampered.jsonl"
    tampered.write_text("\n".join(lines[:-1]) + "\n", "utf-8")  # its last line gone
    pinned = [bundle, "--trust-root", trust]
    fast = [  # taken by the fast start: verdicts, --json, refusals after a good parse
        pinned,
        [*pinned, "--json"],
        ["--json", "--trust-root", trust, bundle, "--json"],
        [bundle],  # UNANCHORED
        [bundle, "--unsafe-trust-bundle-root"],
        [str(tampered), "--trust-root", trust],  # FAILED
        [str(tampered), "--trust-root", trust, "--json"],
        [*pinned, "--run", SEED, "--rank", "1", "--view", "verified"],
        [*pinned, "--run", SEED, "--min-level", "replicated"],  # the expectation fails
        [*pinned, "--run", SEED, "--min-level", "bogus"],  # error[...]: exit 1
        [*pinned, "--run", "nope", "--workers", "1"],
        [*pinned, "--checkpoint", trust, "--checkpoint", trust],  # not a checkpoint
        [*pinned, "--trust-root", bundle],  # the last one given: not a trust root
        [*pinned, "--policy", bundle],
        [str(root), "--trust-root", trust],  # a directory: error[io]
    ]
    typer_only = [  # what the fast start leaves to Typer
        [],
        ["--help"],
        [*pinned, "--help"],
        [bundle, "--trust-root"],
        [bundle, "--trust-root", "--json"],
        [bundle, f"--trust-root={trust}"],
        ["--", *pinned],
        [*pinned, "--", "--json"],
        [*pinned, "--bogus"],
        [*pinned, "-h"],
        [*pinned, bundle],
        [*pinned, "--rank", "2"],  # --rank without --run: Typer's usage error
        [*pinned, "--min-level", "verified"],
        [*pinned, "--run", SEED, "--rank", "0"],
        [*pinned, "--run", SEED, "--rank", "+1"],
        [*pinned, "--view", "VERIFIED"],
        [*pinned, "--workers", "0"],
        [*pinned, "--json=1"],
        [*pinned, "--run", ""],
        [str(root / "gone.jsonl"), "--trust-root", trust],
        [*pinned, "--policy", str(root / "gone")],
    ]
    for argv, expect_typer in [(a, False) for a in fast] + [(a, True) for a in typer_only]:
        with_fast, loaded_typer = _run("fast", ["verify", *argv], env, root)
        with_typer, _ = _run("typer", ["verify", *argv], env, root)
        assert with_fast == with_typer, argv
        assert loaded_typer is expect_typer, argv
