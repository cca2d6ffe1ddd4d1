"""The CLI's fast parameter coercion (api/cli/parameters.py) answers as Typer's own does.

For every parameter of every command, over generated values (well-formed and not): the fast
coercion gives the value Typer's pydantic-built coercion gives, or the same refusal with the
same message. And a command's argument parsing builds no pydantic validator: it is what the
fast path is for.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param
from typer.core import _TyperParameter

from api.cli.lazy import LazyGroup
from api.cli.main import COMMANDS, app
from api.cli.parameters import fast_param

REPO = Path(__file__).resolve().parents[2]


def _walk(command: Any, ctx: Context, path: str) -> Iterator[tuple[str, _TyperParameter, Context]]:
    for param in command.get_params(ctx):
        if isinstance(param, _TyperParameter):
            yield path, param, ctx
    for name, sub in getattr(command, "commands", {}).items():
        yield from _walk(sub, Context(sub, parent=ctx, info_name=name), f"{path} {name}")


def _every_parameter() -> list[tuple[str, _TyperParameter, Context]]:
    root = typer.main.get_command(app)  # with Typer's completion options
    assert isinstance(root, LazyGroup)
    ctx = root.make_context("kernelindex", [], resilient_parsing=True)
    for name in COMMANDS:
        assert root.get_command(ctx, name) is not None, name
    return list(_walk(root, ctx, "kernelindex"))


PARAMETERS = _every_parameter()


def test_every_parameter_kind_the_commands_use_has_a_fast_path() -> None:
    """A new kind of parameter would quietly go back to pydantic: say so here instead."""
    slow = [
        f"{path} {param.name}: {param.type_descriptor.annotation}"
        for path, param, _ in PARAMETERS
        if fast_param(param.type_descriptor) is None
    ]
    assert slow == []
    assert len(PARAMETERS) > 250  # every command's, help options included


def _words(param: _TyperParameter) -> st.SearchStrategy[Any]:
    """Values of the kind a user (or a default, or an environment variable) gives."""
    annotation: Any = param.type_descriptor.annotation
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation)
    named: list[str] = []
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        for member in annotation:
            value = str(member.value)
            named += [value, value.upper(), value.title(), value + " "]
    return st.one_of(
        st.text(max_size=10),
        st.from_regex(
            r"[-+ ]?[0-9_]{1,22}(\.[0-9]{0,18})?([eE][-+]?[0-9]{1,3})?\s?", fullmatch=True
        ),
        st.sampled_from(
            [
                "0",
                "1",
                "-1",
                "0.05",
                "0.049",
                "100",
                "101",
                "65535",
                "65536",
                "nan",
                "inf",
                "",
                ".",
                "-",
                "~",
                "\x00",  # no argv carries NUL, but Typer answers it: the same answer
                "a\x00b",
            ]
        ),
        st.sampled_from(named or ["x"]),
        st.integers(min_value=-(10**20), max_value=10**20),
        st.floats(),
        st.booleans(),
        st.none(),
    )


def _outcome(coerce: Any, value: Any, param: _TyperParameter, ctx: Context) -> tuple[str, str]:
    try:
        got = coerce(value, param=param, ctx=ctx)
    except BadParameter as exc:
        return "refused", exc.format_message()
    except ValueError as exc:
        # What Typer's own conversion raises past Click (a NUL in a path: ``os.stat``), which
        # no argv can carry; the fast path must raise the same.
        return "raised", f"{type(exc).__name__} {exc}"
    return "value", f"{type(got).__name__} {got!r}"


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_the_fast_coercion_answers_as_typers_own(data: st.DataObject) -> None:
    path, param, ctx = data.draw(st.sampled_from(PARAMETERS), label="parameter")
    descriptor = param.type_descriptor
    fast, typers = fast_param(descriptor), build_runtime_param(descriptor)
    assert fast is not None, (path, param.name)
    word = _words(param)
    many = param.multiple or param.nargs == -1
    value = data.draw(st.lists(word, max_size=3).map(tuple) if many else word, label="value")
    assert _outcome(fast.coerce, value, param, ctx) == _outcome(typers.coerce, value, param, ctx), (
        path,
        param.name,
    )


def test_a_path_is_checked_by_typers_rules(tmp_path: Path) -> None:
    """The fast path makes the Path and leaves its checks (here: readable) to Typer."""
    _, param, ctx = next(
        p for p in PARAMETERS if p[0] == "kernelindex verify" and p[1].name == "bundle"
    )
    fast, typers = fast_param(param.type_descriptor), build_runtime_param(param.type_descriptor)
    assert fast is not None
    locked = tmp_path / "locked.jsonl"
    locked.write_text("{}\n")
    locked.chmod(0)
    try:
        assert _outcome(fast.coerce, str(locked), param, ctx) == _outcome(
            typers.coerce, str(locked), param, ctx
        )
    finally:
        locked.chmod(0o600)
    assert fast.coerce(str(locked), param=param, ctx=ctx) == locked


@pytest.mark.parametrize(
    "argv",
    [
        [
            "verify",
            "no-such.bundle.jsonl",
            "--trust-root",
            "no-such-root.json",
            "--run",
            "abc",
            "--rank",
            "2",
            "--view",
            "source-native",
            "--workers",
            "1",
            "--json",
        ],
        ["search", "B200", "--no-such-option"],
        ["show", "--help"],
    ],
)
def test_parsing_a_commands_arguments_builds_no_pydantic_validator(argv: list[str]) -> None:
    """The running command parses its arguments (and refuses as it always did) without
    importing pydantic: the values are the fast path's."""
    code = (
        "import os, sys\n"
        "end = os._exit\n"
        "def done(code):\n"
        "    sys.stderr.write('PYDANTIC %s\\n' % ('pydantic' in sys.modules))\n"
        "    end(code)\n"
        "os._exit = done\n"
        f"sys.argv = ['kernelindex', *{argv!r}]\n"
        "from api.cli.main import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert "PYDANTIC False" in done.stderr, done.stderr[-2000:]
    if argv[0] == "verify":
        assert done.returncode == 1 and "error[bad-trust-root]" in done.stderr
    elif argv[0] == "search":
        assert done.returncode == 2 and "No such option: --no-such-option" in done.stderr
    else:
        assert done.returncode == 0 and "Usage: kernelindex show" in done.stdout
