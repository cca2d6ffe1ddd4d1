"""The one expression language (domain/expressions.py), fuzzed once for all its users: the
SOL-ExecBench and FlashInfer importers and the GPU agent's launch specs."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import DomainError
from domain.expressions import MAX_MAGNITUDE, MAX_SAFE_INTEGER, ExpressionError, evaluate
from domain.importers.operations import evaluate as flashinfer_evaluate
from domain.importers.sol_execbench.workload import evaluate_axis_expression
from gpu_agent.expressions import LaunchSpecError
from gpu_agent.expressions import evaluate as launch_evaluate

VARIABLES = {"m": 7, "n": 12, "k": 4096, "zero": 0}

# Expressions whose Python value is the language's: +, -, *, //, %, ** with small exponents,
# parentheses, names; the language's exact "/" and its bounds are checked apart.
atoms = st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(sorted(VARIABLES)))


def _combine(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(inner, st.sampled_from(["+", "-", "*", "//", "%"]), inner).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})"
    )
    unary = inner.map(lambda e: f"-{e}")
    power = st.tuples(inner, st.integers(0, 3)).map(lambda t: f"({t[0]}) ** {t[1]}")
    return st.one_of(binary, unary, power)


expressions = st.recursive(atoms, _combine, max_leaves=12)


def _python(text: str) -> int | None:
    """Python's value of ``text`` (names bound), or None where Python raises."""
    try:
        value = eval(text, {"__builtins__": {}}, dict(VARIABLES))
    except ZeroDivisionError:
        return None
    assert isinstance(value, int)
    return value


@settings(max_examples=400, deadline=None)
@given(expressions)
def test_the_value_is_pythons_within_the_bound_and_a_clear_error_beyond(text: str) -> None:
    expected = _python(text)
    if len(text) > 256:
        with pytest.raises(ExpressionError, match="longer than"):
            evaluate(text, VARIABLES, extended=True)
        return
    try:
        got = evaluate(text, VARIABLES, extended=True)
    except ExpressionError as exc:
        # Refused: only for a division by zero, a value beyond the bound or deep nesting.
        assert (
            expected is None
            or abs(expected) > MAX_MAGNITUDE
            or "out of" in exc.message
            or "deeper" in exc.message
        ), (text, exc.message)
        return
    assert got == expected, text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.printable + "µ²٣", max_size=60))
def test_any_text_gives_a_value_or_the_languages_own_error(text: str) -> None:
    """Never ``eval``, never an exception of another kind, whatever the text."""
    try:
        value = evaluate(text, VARIABLES, extended=True)
    except ExpressionError:
        return
    assert isinstance(value, int) and abs(value) <= MAX_MAGNITUDE


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("n / 5", "not an integer"),
        ("n // zero", "division by zero"),
        ("2 ** 65", "exponent"),
        ("2 ** 63", "64-bit range"),
        ("q + 1", "unknown name 'q'"),
        ("(" * 40 + "1" + ")" * 40, "deeper"),
        ("ceil_div", "must be called"),
        ("nope(1)", "unknown function"),
        ("", "empty"),
    ],
)
def test_each_refusal_says_why(text: str, why: str) -> None:
    with pytest.raises(ExpressionError, match=why.replace("(", r"\(")):
        evaluate(text, VARIABLES, extended=True)


def test_every_user_reads_an_axis_the_same_way() -> None:
    """SOL axes, FlashInfer axes and the agent evaluate through the same language; each
    keeps its own error type and the importers their manifest-safe bound."""
    text = "(k // 128) * m + n % 5 - 2 ** 3"
    value = evaluate(text, VARIABLES, extended=True)
    assert evaluate_axis_expression(text, VARIABLES) == value
    assert flashinfer_evaluate(text, VARIABLES.__getitem__, "here") == value
    assert launch_evaluate(text, VARIABLES, extended=True) == value
    big = "2 ** 60"
    assert launch_evaluate(big, {}, extended=True) == 2**60
    with pytest.raises(DomainError, match="2\\^53"):
        evaluate_axis_expression(big, {})
    with pytest.raises(DomainError, match="here: "):
        flashinfer_evaluate(big, {}.__getitem__, "here")
    with pytest.raises(LaunchSpecError, match="'/' is not allowed"):
        launch_evaluate("n / 2", VARIABLES)
    assert evaluate(str(MAX_SAFE_INTEGER), {}, bound=MAX_SAFE_INTEGER) == MAX_SAFE_INTEGER
