"""Safe integer expressions over workload axes (launch specs and SOL ``expr`` axes).

A submitted launch spec says e.g. ``"grid": ["ceil_div(batch_size, 4)"]``. The agent must
evaluate it without running submitted code, so this is a small tokenizer and a
recursive-descent parser over integers only — never ``eval``. Everything is bounded: the
text length, the nesting depth, and every intermediate value (no ``10**10**10`` tricks).

Grammar (launch specs)::

    expr  := term (("+" | "-") term)*
    term  := unary (("*" | "//" | "%") unary)*
    unary := ("-" | "+") unary | power
    power := atom                      # with extended=True: atom ("**" unary)?
    atom  := INT | NAME | NAME "(" expr ("," expr)* ")" | "(" expr ")"

Functions: ``ceil_div(a, b)``, ``min(a, b, ...)``, ``max(a, b, ...)``. ``//`` and ``%`` are
Python's floor division and modulo (axes are non-negative, so they match C there).

``extended=True`` (used for SOL-ExecBench ``expr`` axes, whose docs also allow ``/`` and
``**``) adds ``**`` (exponent 0..64) and ``/``, which must divide exactly: an axis is an
integer, and a fractional one is an error rather than a silent truncation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

MAX_EXPRESSION_LENGTH = 256
MAX_DEPTH = 32
# Every intermediate value stays within a signed 64-bit integer: what a kernel could use.
MAX_MAGNITUDE = 2**63 - 1
MAX_EXPONENT = 64

# CUDA launch limits (all current architectures): gridDim.x ≤ 2^31−1, gridDim.y/z ≤ 65535,
# blockDim.x/y ≤ 1024, blockDim.z ≤ 64 and at most 1024 threads per block.
MAX_GRID = (2**31 - 1, 65_535, 65_535)
MAX_BLOCK = (1_024, 1_024, 64)
MAX_THREADS_PER_BLOCK = 1_024
# The largest dynamic shared memory any current NVIDIA GPU allows per block (227 KiB,
# Hopper/Blackwell opt-in); the backend still rejects what its own device cannot give.
MAX_SHARED_MEM_BYTES = 227 * 1024


class LaunchSpecError(ValueError):
    """A launch expression is malformed, unknown, or evaluates out of range."""


@dataclass(frozen=True)
class _Token:
    kind: str  # "int", "name", "op", "end"
    text: str
    position: int


_OPERATORS_2 = ("//", "**")
_OPERATORS_1 = "+-*/%(),"


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in " \t":
            i += 1
            continue
        if c.isascii() and c.isdigit():
            j = i
            while j < len(text) and text[j].isascii() and text[j].isdigit():
                j += 1
            tokens.append(_Token("int", text[i:j], i))
            i = j
            continue
        if c.isascii() and (c.isalpha() or c == "_"):
            j = i
            while j < len(text) and text[j].isascii() and (text[j].isalnum() or text[j] == "_"):
                j += 1
            tokens.append(_Token("name", text[i:j], i))
            i = j
            continue
        if text[i : i + 2] in _OPERATORS_2:
            tokens.append(_Token("op", text[i : i + 2], i))
            i += 2
            continue
        if c in _OPERATORS_1:
            tokens.append(_Token("op", c, i))
            i += 1
            continue
        raise LaunchSpecError(f"unexpected character {c!r} at position {i} in {text!r}")
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _checked(value: int, text: str) -> int:
    if abs(value) > MAX_MAGNITUDE:
        raise LaunchSpecError(f"value out of the 64-bit range while evaluating {text!r}")
    return value


def _ceil_div(args: Sequence[int], text: str) -> int:
    if len(args) != 2:
        raise LaunchSpecError(f"ceil_div takes 2 arguments, got {len(args)} in {text!r}")
    a, b = args
    if b == 0:
        raise LaunchSpecError(f"division by zero in {text!r}")
    return -(-a // b)


def _min(args: Sequence[int], text: str) -> int:
    if not args:
        raise LaunchSpecError(f"min needs at least 1 argument in {text!r}")
    return min(args)


def _max(args: Sequence[int], text: str) -> int:
    if not args:
        raise LaunchSpecError(f"max needs at least 1 argument in {text!r}")
    return max(args)


_FUNCTIONS: dict[str, Callable[[Sequence[int], str], int]] = {
    "ceil_div": _ceil_div,
    "min": _min,
    "max": _max,
}


class _Parser:
    """Parses and evaluates in one pass: the expressions are tiny, so no tree is kept."""

    def __init__(self, text: str, variables: Mapping[str, int], extended: bool) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.index = 0
        self.variables = variables
        self.extended = extended
        self.depth = 0

    def _peek(self) -> _Token:
        return self.tokens[self.index]

    def _take(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def _expect(self, text: str) -> None:
        token = self._take()
        if token.kind != "op" or token.text != text:
            found = "end of expression" if token.kind == "end" else repr(token.text)
            raise LaunchSpecError(
                f"expected {text!r} at position {token.position}, found {found} in {self.text!r}"
            )

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise LaunchSpecError(f"expression nested deeper than {MAX_DEPTH} in {self.text!r}")

    def parse(self) -> int:
        value = self._expr()
        token = self._peek()
        if token.kind != "end":
            raise LaunchSpecError(
                f"unexpected {token.text!r} at position {token.position} in {self.text!r}"
            )
        return value

    def _expr(self) -> int:
        self._enter()
        value = self._term()
        while self._peek().kind == "op" and self._peek().text in ("+", "-"):
            op = self._take().text
            right = self._term()
            value = _checked(value + right if op == "+" else value - right, self.text)
        self.depth -= 1
        return value

    def _term(self) -> int:
        value = self._unary()
        while self._peek().kind == "op" and self._peek().text in ("*", "//", "%", "/"):
            token = self._take()
            if token.text == "/" and not self.extended:
                raise LaunchSpecError(
                    f"'/' is not allowed in launch expressions (use // or ceil_div) in "
                    f"{self.text!r}"
                )
            right = self._unary()
            if token.text == "*":
                value = _checked(value * right, self.text)
                continue
            if right == 0:
                raise LaunchSpecError(f"division by zero in {self.text!r}")
            if token.text == "//":
                value = value // right
            elif token.text == "%":
                value = value % right
            else:
                if value % right:
                    raise LaunchSpecError(f"{value} / {right} is not an integer in {self.text!r}")
                value = value // right
        return value

    def _unary(self) -> int:
        token = self._peek()
        if token.kind == "op" and token.text in ("-", "+"):
            self._take()
            self._enter()
            operand = self._unary()
            self.depth -= 1
            return -operand if token.text == "-" else operand
        return self._power()

    def _power(self) -> int:
        base = self._atom()
        token = self._peek()
        if token.kind == "op" and token.text == "**":
            if not self.extended:
                raise LaunchSpecError(f"'**' is not allowed in launch expressions: {self.text!r}")
            self._take()
            self._enter()
            exponent = self._unary()
            self.depth -= 1
            if not 0 <= exponent <= MAX_EXPONENT:
                raise LaunchSpecError(
                    f"exponent {exponent} outside 0..{MAX_EXPONENT} in {self.text!r}"
                )
            # Bounded before computing: |base| ≥ 2 with exponent 64 already exceeds 2^63.
            if abs(base) >= 2 and exponent * (abs(base).bit_length() - 1) > 63:
                raise LaunchSpecError(f"value out of the 64-bit range in {self.text!r}")
            return _checked(base**exponent, self.text)
        return base

    def _atom(self) -> int:
        token = self._take()
        if token.kind == "int":
            if len(token.text) > 19:
                raise LaunchSpecError(f"integer {token.text} too large in {self.text!r}")
            return _checked(int(token.text), self.text)
        if token.kind == "name":
            if self._peek().kind == "op" and self._peek().text == "(":
                return self._call(token)
            if token.text in _FUNCTIONS:
                raise LaunchSpecError(f"{token.text} must be called, in {self.text!r}")
            if token.text not in self.variables:
                known = ", ".join(sorted(self.variables)) or "none"
                raise LaunchSpecError(
                    f"unknown name {token.text!r} in {self.text!r} (known axes: {known})"
                )
            return _checked(self.variables[token.text], self.text)
        if token.kind == "op" and token.text == "(":
            value = self._expr()
            self._expect(")")
            return value
        found = "end of expression" if token.kind == "end" else repr(token.text)
        raise LaunchSpecError(f"unexpected {found} at position {token.position} in {self.text!r}")

    def _call(self, name: _Token) -> int:
        function = _FUNCTIONS.get(name.text)
        if function is None:
            raise LaunchSpecError(
                f"unknown function {name.text!r} in {self.text!r} "
                f"(allowed: {', '.join(sorted(_FUNCTIONS))})"
            )
        self._expect("(")
        args = [self._expr()]
        while self._peek().kind == "op" and self._peek().text == ",":
            self._take()
            args.append(self._expr())
        self._expect(")")
        return _checked(function(args, self.text), self.text)


def evaluate(expression: str | int, variables: Mapping[str, int], *, extended: bool = False) -> int:
    """The integer value of ``expression`` with ``variables`` bound (axis name → value).

    A JSON integer is accepted as is (``"sharedMemBytes": 0``); booleans and floats are not
    integers here, whatever Python thinks of ``True``.
    """
    if isinstance(expression, bool) or not isinstance(expression, (str, int)):
        raise LaunchSpecError(
            f"an expression must be a string or an integer, got {type(expression).__name__}"
        )
    if isinstance(expression, int):
        return _checked(expression, str(expression))
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise LaunchSpecError(
            f"expression longer than {MAX_EXPRESSION_LENGTH} characters: {expression[:40]!r}..."
        )
    if not expression.strip():
        raise LaunchSpecError("empty expression")
    return _Parser(expression, variables, extended).parse()


def _dims(
    what: str,
    expressions: Sequence[str | int],
    variables: Mapping[str, int],
    limits: tuple[int, int, int],
) -> tuple[int, int, int]:
    if not 1 <= len(expressions) <= 3:
        raise LaunchSpecError(f"{what} needs 1 to 3 dimensions, got {len(expressions)}")
    values = [evaluate(e, variables) for e in expressions]
    values += [1] * (3 - len(values))
    for axis, (value, limit) in enumerate(zip(values, limits, strict=True)):
        if not 1 <= value <= limit:
            raise LaunchSpecError(
                f"{what}[{axis}] = {value} is outside 1..{limit} "
                f"(from {expressions[axis] if axis < len(expressions) else 1!r})"
            )
    return values[0], values[1], values[2]


def grid_dims(
    expressions: Sequence[str | int], variables: Mapping[str, int]
) -> tuple[int, int, int]:
    """Grid (x, y, z) from 1–3 expressions; missing dimensions are 1."""
    return _dims("grid", expressions, variables, MAX_GRID)


def block_dims(
    expressions: Sequence[str | int], variables: Mapping[str, int]
) -> tuple[int, int, int]:
    """Block (x, y, z) from 1–3 expressions, at most 1024 threads in total."""
    x, y, z = _dims("block", expressions, variables, MAX_BLOCK)
    if x * y * z > MAX_THREADS_PER_BLOCK:
        raise LaunchSpecError(
            f"block {x}×{y}×{z} = {x * y * z} threads exceeds {MAX_THREADS_PER_BLOCK}"
        )
    return x, y, z


def shared_mem_bytes(expression: str | int, variables: Mapping[str, int]) -> int:
    value = evaluate(expression, variables)
    if not 0 <= value <= MAX_SHARED_MEM_BYTES:
        raise LaunchSpecError(f"sharedMemBytes = {value} is outside 0..{MAX_SHARED_MEM_BYTES}")
    return value
