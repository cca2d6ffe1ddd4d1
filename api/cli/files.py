"""Files a command writes: whole or not at all.

A command that fails half way (a run it cannot resolve, a full disk, an interrupt) must not
leave a partial file where the user asked for one, nor damage the one that was there: a
truncated bundle or checkpoint reads as a different, wrong one. So a file is written under a
temporary name in a folder of its own beside the target (same file system), and renamed
over the target only once it is complete; whatever fails, the temporary folder goes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class FileExistsRefusal(FileExistsError):
    """The target exists and the command may not replace it (a private key)."""


@contextmanager
def written_whole(path: Path, *, replace: bool = True) -> Iterator[Path]:
    """A path to write ``path``'s content to; it becomes ``path`` when the block ends without
    an exception (``replace=False``: only if ``path`` does not exist then), else it is
    removed and ``path`` is left as it was."""
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
    try:
        written = staging / path.name
        yield written
        put_in_place(written, path, replace=replace)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def written_into(folder: Path) -> Iterator[Path]:
    """A folder to write several files to; they are moved into ``folder`` (made if need be)
    only once every one is written, each whole, replacing a file of the same name; on a
    failure none is, and ``folder`` is left as it was."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".partial", dir=folder))
    try:
        yield staging
        for written in sorted(staging.iterdir()):
            put_in_place(written, folder / written.name, replace=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def put_in_place(written: Path, path: Path, *, replace: bool) -> None:
    """The complete file ``written`` becomes ``path`` (one rename on the same file system)."""
    if replace:
        os.replace(written, path)
    else:
        _move_new(written, path)


def _move_new(written: Path, path: Path) -> None:
    """``written`` to ``path``, never over an existing file: a hard link fails if the name
    is taken, with no window between the check and the move."""
    try:
        os.link(written, path)
    except FileExistsError:
        raise FileExistsRefusal(f"{path} already exists") from None
    except OSError:
        # A file system without hard links: check, then move (a window, but no overwrite
        # of a file that existed when the command began).
        if path.exists():
            raise FileExistsRefusal(f"{path} already exists") from None
        os.replace(written, path)
