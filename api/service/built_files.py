"""The whole-log bundle anyone may ask for (``GET /v1/registry.bundle``), built once per tree
size and kept in a file, one build at a time.

Built, it is every event of the log with its proof (93 MB and minutes of CPU on the catalog
ledger): built per request, a few anonymous clients would keep every core busy. A bundle is a
self-describing snapshot (it carries the checkpoint it proves against), so while a newer one
is being built the last whole one is as good an answer; only the first build is waited for.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from api.service.export import CHUNK  # the same pieces as the other streamed exports


class BuiltFile:
    """The last file ``build`` wrote for some key (a tree size), reused while the key holds."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._building = threading.Lock()  # one build at a time
        self._swap = threading.Lock()  # the kept file is opened or replaced, not both at once
        self._current: tuple[int, Path] | None = None
        self.builds = 0  # how many files were built (what the tests count)

    def pieces(self, key: int, build: Callable[[IO[str]], object]) -> Iterator[bytes]:
        """The file for ``key``: the one kept, else built now; while another request builds
        one, the last whole one (only a process with none waits). Opened before this
        returns, so a newer build replacing it does not cut a reader short."""
        handle = self._open(key)
        if handle is None:
            if self._building.acquire(blocking=self._current is None):
                try:
                    self._build(key, build)
                finally:
                    self._building.release()
            handle = self._open(None)
        assert handle is not None  # a build that failed raised
        return _chunks(handle)

    def _open(self, key: int | None) -> IO[bytes] | None:
        """The kept file, opened: if it is ``key``'s (None: whichever key)."""
        with self._swap:
            current = self._current
            if current is None or (key is not None and current[0] != key):
                return None
            return current[1].open("rb")

    def _build(self, key: int, build: Callable[[IO[str]], object]) -> None:
        with self._swap:
            if self._current is not None and self._current[0] == key:
                return  # built by the request this one waited for
        fd, name = tempfile.mkstemp(prefix=self.prefix)
        try:
            with open(fd, "w", encoding="utf-8", newline="") as out:
                build(out)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
        with self._swap:
            old, self._current = self._current, (key, Path(name))
            self.builds += 1
        if old is not None:
            old[1].unlink(missing_ok=True)  # readers hold it open: it goes when they finish

    def close(self) -> None:
        with self._swap:
            current, self._current = self._current, None
        if current is not None:
            current[1].unlink(missing_ok=True)


def _chunks(handle: IO[bytes]) -> Iterator[bytes]:
    with handle:
        while piece := handle.read(CHUNK):
            yield piece
