"""Hypothesis strategies that start from real documents and break them a little.

Random bytes mostly test the first line of a parser; mutations of valid documents (a byte
flipped, a field replaced, deleted or added, a slice dropped or repeated) reach the checks
behind it. Budgets: FUZZ_EXAMPLES per property in the default run, more under ``-m slow``.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ_EXAMPLES = int(os.environ.get("KERNELINDEX_FUZZ_EXAMPLES", "150"))
SLOW_EXAMPLES = int(os.environ.get("KERNELINDEX_FUZZ_SLOW_EXAMPLES", "3000"))

# Deterministic in the default run (a failure reproduces), no per-example deadline (CI noise).
fuzz = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
fuzz_long = settings(fuzz, max_examples=SLOW_EXAMPLES, derandomize=False)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    # Times that match RFC 3339's pattern but leave years 1-9999 once in UTC, or are no day.
    | st.sampled_from(
        ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "2026-02-30T00:00:00Z"]
    )
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


@st.composite
def mutated_json(draw: st.DrawFn, original: Any, max_edits: int = 3) -> Any:
    """``original`` with 1..max_edits fields replaced, deleted, or added."""
    doc = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, max_edits))):
        path = draw(st.sampled_from(_paths(doc)))
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if not path:
            if action == "replace":
                doc = draw(json_values)
            continue
        parent = _parent(doc, path)
        if action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = draw(json_values)
        else:
            parent.insert(draw(st.integers(0, len(parent))), draw(json_values))
    return doc


@st.composite
def mutated_bytes(draw: st.DrawFn, original: bytes, max_edits: int = 3) -> bytes:
    """``original`` with bytes flipped, inserted, deleted, or a slice repeated or cut off."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, max_edits))):
        if not data:
            data += draw(st.binary(min_size=1, max_size=8))
            continue
        at = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["flip", "set", "insert", "delete", "repeat", "truncate"]))
        if action == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "set":
            data[at] = draw(st.sampled_from(b'{}[]":,\\0123456789-.eE \n\xff\xc3tfn'))
        elif action == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif action == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif action == "repeat":
            data[at:at] = data[at : at + draw(st.integers(1, 64))]
        else:
            del data[at:]
    return bytes(data)
