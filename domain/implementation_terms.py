"""What an implementation's manifest says about the terms a user can take it on: the
license it is under and whether it can be installed. The KernelIndex catalog's
``licenseExpression`` and ``installable`` columns of an implementation are these, read from
the same manifest (``spec.licensing``, ``spec.buildVariants``); search filters on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

NOT_STATED: Final = "not stated"  # the license of a run whose implementation says none
INSTALLABLE: Final = ("yes", "no")


def license_of(implementation: object) -> str | None:
    """The license the implementation is under: the one concluded, else the one declared
    (``spec.licensing``); None when it states neither, or when there is no manifest."""
    licensing = _spec(implementation).get("licensing")
    if not isinstance(licensing, Mapping):
        return None
    for field in ("concluded", "declared"):
        value = licensing.get(field)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def is_installable(implementation: object) -> bool:
    """Whether a build variant says how to install it (``spec.buildVariants[].install``)."""
    variants = _spec(implementation).get("buildVariants")
    return isinstance(variants, list) and any(
        isinstance(v, Mapping) and isinstance(v.get("install"), Mapping) and v["install"]
        for v in variants
    )


def _spec(implementation: object) -> Mapping[str, Any]:
    spec = implementation.get("spec") if isinstance(implementation, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}
