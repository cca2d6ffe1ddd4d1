"""Safe integer expressions over workload axes: one language for every place that reads one
(SOL-ExecBench ``expr`` axes and FlashInfer derived axes in the importers, launch specs in the
GPU agent), so an axis means the same wherever it is evaluated.

Submitted text is never run: a small tokenizer and a recursive-descent parser over integers
only, never ``eval``. Everything is bounded: the text length, the nesting depth, and every
intermediate value (no ``10**10**10`` tricks).

Grammar::

    expr  := term (("+" | "-") term)*
    term  := unary (("*" | "//" | "%") unary)*     # extended: also "/", which must divide
    unary := ("-" | "+") unary | power
    power := atom                                  # extended: atom ("**" unary)?, 0..64
    atom  := INT | NAME | NAME "(" expr ("," expr)* ")" | "(" expr ")"

Functions (unless turned off): ``ceil_div(a, b)``, ``min(a, b, ...)``, ``max(a, b, ...)``.
``//`` and ``%`` are Python's floor division and modulo.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from domain.errors import DomainError

MAX_EXPRESSION_LENGTH = 256
MAX_DEPTH = 32
# By default every intermediate value stays within a signed 64-bit integer: what a kernel
# could use. Values written into manifests are bounded by what a JSON number holds exactly.
MAX_MAGNITUDE = 2**63 - 1
MAX_SAFE_INTEGER = 2**53 - 1
MAX_EXPONENT = 64
_RANGES = {MAX_MAGNITUDE: "the 64-bit range", MAX_SAFE_INTEGER: "±(2^53−1)"}

Variables = Mapping[str, int] | Callable[[str], int]


class ExpressionError(DomainError):
    """An expression is malformed, names what is not bound, or evaluates out of range."""

    code = "invalid-expression"


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
        raise ExpressionError(f"unexpected character {c!r} at position {i} in {text!r}")
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _ceil_div(args: Sequence[int], text: str) -> int:
    if len(args) != 2:
        raise ExpressionError(f"ceil_div takes 2 arguments, got {len(args)} in {text!r}")
    a, b = args
    if b == 0:
        raise ExpressionError(f"division by zero in {text!r}")
    return -(-a // b)


def _min(args: Sequence[int], text: str) -> int:
    if not args:
        raise ExpressionError(f"min needs at least 1 argument in {text!r}")
    return min(args)


def _max(args: Sequence[int], text: str) -> int:
    if not args:
        raise ExpressionError(f"max needs at least 1 argument in {text!r}")
    return max(args)


_FUNCTIONS: dict[str, Callable[[Sequence[int], str], int]] = {
    "ceil_div": _ceil_div,
    "min": _min,
    "max": _max,
}


class _Parser:
    """Parses and evaluates in one pass: the expressions are tiny, so no tree is kept."""

    def __init__(
        self, text: str, variables: Variables, extended: bool, bound: int, functions: bool
    ) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.index = 0
        self.variables = variables
        self.extended = extended
        self.bound = bound
        self.functions = functions
        self.depth = 0

    def _checked(self, value: int) -> int:
        if abs(value) > self.bound:
            where = _RANGES.get(self.bound, f"±{self.bound}")
            raise ExpressionError(f"value out of {where} while evaluating {self.text!r}")
        return value

    def _variable(self, name: str) -> int:
        if callable(self.variables):
            return self.variables(name)  # the caller's own error for a name it lacks
        if name not in self.variables:
            known = ", ".join(sorted(self.variables)) or "none"
            raise ExpressionError(f"unknown name {name!r} in {self.text!r} (known axes: {known})")
        return self.variables[name]

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
            raise ExpressionError(
                f"expected {text!r} at position {token.position}, found {found} in {self.text!r}"
            )

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError(f"expression nested deeper than {MAX_DEPTH} in {self.text!r}")

    def parse(self) -> int:
        value = self._expr()
        token = self._peek()
        if token.kind != "end":
            raise ExpressionError(
                f"unexpected {token.text!r} at position {token.position} in {self.text!r}"
            )
        return value

    def _expr(self) -> int:
        self._enter()
        value = self._term()
        while self._peek().kind == "op" and self._peek().text in ("+", "-"):
            op = self._take().text
            right = self._term()
            value = self._checked(value + right if op == "+" else value - right)
        self.depth -= 1
        return value

    def _term(self) -> int:
        value = self._unary()
        while self._peek().kind == "op" and self._peek().text in ("*", "//", "%", "/"):
            token = self._take()
            if token.text == "/" and not self.extended:
                raise ExpressionError(
                    f"'/' is not allowed in launch expressions (use // or ceil_div) in "
                    f"{self.text!r}"
                )
            right = self._unary()
            if token.text == "*":
                value = self._checked(value * right)
                continue
            if right == 0:
                raise ExpressionError(f"division by zero in {self.text!r}")
            if token.text == "//":
                value = value // right
            elif token.text == "%":
                value = value % right
            else:
                if value % right:
                    raise ExpressionError(f"{value} / {right} is not an integer in {self.text!r}")
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
                raise ExpressionError(f"'**' is not allowed in launch expressions: {self.text!r}")
            self._take()
            self._enter()
            exponent = self._unary()
            self.depth -= 1
            if not 0 <= exponent <= MAX_EXPONENT:
                raise ExpressionError(
                    f"exponent {exponent} outside 0..{MAX_EXPONENT} in {self.text!r}"
                )
            # Bounded before computing: |base| ≥ 2 with exponent 64 already exceeds 2^63.
            if abs(base) >= 2 and exponent * (abs(base).bit_length() - 1) > self.bound.bit_length():
                return self._checked(self.bound + 1)
            return self._checked(base**exponent)
        return base

    def _atom(self) -> int:
        token = self._take()
        if token.kind == "int":
            if len(token.text) > 19:
                raise ExpressionError(f"integer {token.text} too large in {self.text!r}")
            return self._checked(int(token.text))
        if token.kind == "name":
            if self._peek().kind == "op" and self._peek().text == "(":
                return self._call(token)
            if self.functions and token.text in _FUNCTIONS:
                raise ExpressionError(f"{token.text} must be called, in {self.text!r}")
            return self._checked(self._variable(token.text))
        if token.kind == "op" and token.text == "(":
            value = self._expr()
            self._expect(")")
            return value
        found = "end of expression" if token.kind == "end" else repr(token.text)
        raise ExpressionError(f"unexpected {found} at position {token.position} in {self.text!r}")

    def _call(self, name: _Token) -> int:
        function = _FUNCTIONS.get(name.text) if self.functions else None
        if function is None:
            raise ExpressionError(
                f"unknown function {name.text!r} in {self.text!r} "
                f"(allowed: {', '.join(sorted(_FUNCTIONS))})"
            )
        self._expect("(")
        args = [self._expr()]
        while self._peek().kind == "op" and self._peek().text == ",":
            self._take()
            args.append(self._expr())
        self._expect(")")
        return self._checked(function(args, self.text))


def evaluate(
    expression: str | int,
    variables: Variables,
    *,
    extended: bool = False,
    bound: int = MAX_MAGNITUDE,
    functions: bool = True,
) -> int:
    """The integer value of ``expression`` with ``variables`` bound: axis name → value, or a
    function that gives a name's value (and raises the caller's own error for one it lacks).

    ``extended`` adds ``**`` and exact ``/``; ``bound`` caps every intermediate value;
    ``functions`` allows ``ceil_div``, ``min`` and ``max``. A JSON integer is accepted as is
    (``"sharedMemBytes": 0``); booleans and floats are not integers here, whatever Python
    thinks of ``True``.
    """
    if isinstance(expression, bool) or not isinstance(expression, (str, int)):
        raise ExpressionError(
            f"an expression must be a string or an integer, got {type(expression).__name__}"
        )
    parser = _Parser(str(expression), variables, extended, bound, functions)
    if isinstance(expression, int):
        return parser._checked(expression)
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ExpressionError(
            f"expression longer than {MAX_EXPRESSION_LENGTH} characters: {expression[:40]!r}..."
        )
    if not expression.strip():
        raise ExpressionError("empty expression")
    return parser.parse()
