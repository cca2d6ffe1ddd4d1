"""Launch-spec expressions: a parser over integers, never eval (gpu_agent/expressions.py)."""

from __future__ import annotations

import re

import pytest

from domain.expressions import MAX_DEPTH, MAX_EXPRESSION_LENGTH
from gpu_agent.expressions import (
    LaunchSpecError,
    block_dims,
    evaluate,
    grid_dims,
    shared_mem_bytes,
)

AXES = {"batch_size": 7, "hidden_size": 4096, "zero": 0}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        (42, 42),
        ("batch_size", 7),
        ("batch_size * hidden_size", 7 * 4096),
        ("hidden_size // 8", 512),
        ("hidden_size % 1000", 96),
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 3 - 2", 5),  # left associative
        ("100 // 10 // 5", 2),
        ("-batch_size + 10", 3),
        ("--3", 3),
        ("+3", 3),
        ("-7 // 2", -4),  # Python floor division, documented
        ("ceil_div(batch_size, 4)", 2),
        ("ceil_div(8, 4)", 2),
        ("ceil_div(batch_size * hidden_size, 256)", 112),
        ("min(batch_size, 1024)", 7),
        ("max(batch_size, 3, 11)", 11),
        ("min(5)", 5),
        ("  max( 1 ,2 )  ", 2),
        ("ceil_div(max(batch_size, 1), min(4, hidden_size))", 2),
    ],
)
def test_valid_expressions(text: str | int, value: int) -> None:
    assert evaluate(text, AXES) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("seq_len", "unknown name 'seq_len'"),
        ("sqrt(4)", "unknown function 'sqrt'"),
        ("__import__", "unknown name"),
        ("batch_size // zero", "division by zero"),
        ("batch_size % 0", "division by zero"),
        ("ceil_div(1, zero)", "division by zero"),
        ("ceil_div(1)", "ceil_div takes 2 arguments"),
        ("1 +", "unexpected end of expression"),
        ("(1 + 2", "expected ')'"),
        ("1 2", "unexpected '2'"),
        ("1 ** 2", "'**' is not allowed"),
        ("8 / 2", "'/' is not allowed"),
        ("1.5", "unexpected character '.'"),
        ("batch_size; import os", "unexpected character ';'"),
        ("a.b", "unexpected character"),
        ("", "empty expression"),
        ("min", "must be called"),
        ("min()", "unexpected ')'"),
        ("99999999999999999999", "too large"),
        ("9223372036854775807 + 1", "64-bit range"),
        ("4294967296 * 4294967296", "64-bit range"),
        ("x" * (MAX_EXPRESSION_LENGTH + 1), "longer than"),
        ("(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1), "nested deeper"),
        ("-" * (MAX_DEPTH + 2) + "1", "nested deeper"),
    ],
)
def test_every_error_is_a_launch_spec_error(text: str, message: str) -> None:
    with pytest.raises(LaunchSpecError, match=re.escape(message)):
        evaluate(text, AXES)


@pytest.mark.parametrize("value", [1.5, True, None, [1]])
def test_non_integer_values_are_refused(value: object) -> None:
    with pytest.raises(LaunchSpecError, match="string or an integer"):
        evaluate(value, AXES)  # type: ignore[arg-type]


def test_extended_mode_for_sol_axis_expressions() -> None:
    assert evaluate("hidden_size / 2", AXES, extended=True) == 2048
    assert evaluate("2 ** 10", AXES, extended=True) == 1024
    assert evaluate("2 ** 3 ** 2", AXES, extended=True) == 512  # right associative
    with pytest.raises(LaunchSpecError, match="not an integer"):
        evaluate("batch_size / 2", AXES, extended=True)
    with pytest.raises(LaunchSpecError, match="exponent"):
        evaluate("2 ** 65", AXES, extended=True)
    with pytest.raises(LaunchSpecError, match="64-bit range"):
        evaluate("10 ** 30", AXES, extended=True)
    with pytest.raises(LaunchSpecError, match="exponent 10000000000 outside"):
        evaluate("10 ** 10 ** 10", AXES, extended=True)


def test_grid_and_block_ranges() -> None:
    assert grid_dims(["batch_size"], AXES) == (7, 1, 1)
    assert grid_dims(["batch_size", 2, "3"], AXES) == (7, 2, 3)
    assert grid_dims([2**31 - 1], AXES) == (2**31 - 1, 1, 1)
    assert block_dims([256], AXES) == (256, 1, 1)
    assert block_dims([32, 32], AXES) == (32, 32, 1)
    assert shared_mem_bytes("0", AXES) == 0
    assert shared_mem_bytes("hidden_size * 4", AXES) == 16384

    with pytest.raises(LaunchSpecError, match=r"grid\[0\] = 0 is outside"):
        grid_dims(["zero"], AXES)
    with pytest.raises(LaunchSpecError, match=r"grid\[0\] = 2147483648"):
        grid_dims([2**31], AXES)
    with pytest.raises(LaunchSpecError, match=r"grid\[1\] = 65536"):
        grid_dims([1, 65536], AXES)
    with pytest.raises(LaunchSpecError, match="1 to 3 dimensions"):
        grid_dims([], AXES)
    with pytest.raises(LaunchSpecError, match="1 to 3 dimensions"):
        grid_dims([1, 1, 1, 1], AXES)
    with pytest.raises(LaunchSpecError, match=r"block\[0\] = 1025"):
        block_dims([1025], AXES)
    with pytest.raises(LaunchSpecError, match=r"block\[2\] = 65"):
        block_dims([1, 1, 65], AXES)
    with pytest.raises(LaunchSpecError, match="2048 threads exceeds 1024"):
        block_dims([64, 32], AXES)
    with pytest.raises(LaunchSpecError, match=r"block\[0\] = -1"):
        block_dims(["-1"], AXES)
    with pytest.raises(LaunchSpecError, match="sharedMemBytes"):
        shared_mem_bytes("-1", AXES)
    with pytest.raises(LaunchSpecError, match="sharedMemBytes"):
        shared_mem_bytes(1 << 30, AXES)
