"""The bundle format: its name (what ``ledger.bundle`` writes and ``ledger.verify`` reads) and
how one of its lines is read."""

from __future__ import annotations

from typing import Any

import msgspec

BUNDLE_FORMAT = "kernelindex-bundle/v2"


class UnreadableLineError(ValueError):
    """A bundle line that is not a JSON document."""


def read_line(line: str | bytes) -> Any:
    """A bundle line's JSON value. msgspec: a third of ``json.loads``' time, and a bundle is
    read line by line (the routing in the verifying process, the events again in a worker:
    both read with this, so both see the same value). It accepts only standard JSON (no NaN,
    no lone surrogates), which is all ``ledger.bundle`` writes."""
    try:
        return msgspec.json.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise UnreadableLineError(str(exc)) from None
