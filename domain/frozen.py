"""Instances of frozen dataclasses made without their generated ``__init__``.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``; a
projection rebuild makes a profile, evidence facts and state, a rank entry and a ranked entry
for every run, and those calls are a good part of that. :func:`made` gives the instance the
``__init__`` would: the same class, the same ``__dict__`` (every field, in field order), and
``__post_init__`` run on it. It takes classes whose ``__init__`` does only that: every field
an ``__init__`` parameter, no ``InitVar``, no slots.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

T = TypeVar("T")

# Per class: its fields in order, and whether it has a __post_init__.
_SHAPES: dict[type[Any], tuple[tuple[str, ...], bool]] = {}


def _shape(cls: type[Any]) -> tuple[tuple[str, ...], bool]:
    found = _SHAPES.get(cls)
    if found is None:
        params = getattr(cls, "__dataclass_params__", None)
        if params is None or not params.frozen or not params.init or hasattr(cls, "__slots__"):
            raise TypeError(f"{cls.__name__} is not a frozen dataclass made by its __init__")
        names = tuple(f.name for f in dataclasses.fields(cls))
        parameters = tuple(inspect.signature(cls.__init__).parameters)[1:]
        if parameters != names:  # an InitVar, or a field the __init__ does not take
            raise TypeError(f"{cls.__name__}.__init__ takes {parameters}, not its fields")
        found = _SHAPES[cls] = (names, hasattr(cls, "__post_init__"))
    return found


def field_names(cls: type[Any]) -> tuple[str, ...]:
    """The fields of a dataclass ``made`` can make, in order."""
    return _shape(cls)[0]


def made(cls: type[T], values: dict[str, Any]) -> T:
    """``cls(**values)``, where ``values`` holds every field of ``cls`` in field order."""
    names, post_init = _shape(cls)
    if tuple(values) != names:
        raise TypeError(f"{cls.__name__} takes the fields {names}, in that order")
    instance: T = object.__new__(cls)
    instance.__dict__.update(values)
    if post_init:
        instance.__post_init__()  # type: ignore[attr-defined]
    return instance
