"""A pytest plugin for tests/test_collection_is_stable.py: writes the collected test ids, one a
line, to the file that $KERNELINDEX_COLLECTED_IDS names (whatever the verbosity)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    target = os.environ.get("KERNELINDEX_COLLECTED_IDS")
    if target:
        Path(target).write_text("".join(item.nodeid + "\n" for item in session.items), "utf-8")
