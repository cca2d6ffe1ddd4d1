"""The documentation's tours, run as a newcomer would paste them (issue 33).

A fenced ``sh`` block that follows a line ``<!-- tour -->`` in README.md or docs/*.md is part
of its document's tour (the convention is stated in docs/README.md). Each document's tour runs
top to bottom in one bash process with ``set -euo pipefail``, from the repository root, in a
fresh ledger home and SQLite database under ``tmp_path``, with this environment's
``kernelindex`` first on PATH. Unmarked blocks (the pip set-up commands, a deployment's
commands, a GPU agent) are never run here. A tour that starts a server stops it itself; the
whole process group is ended after the run whatever happened, so nothing outlives the test.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- tour -->"
# A hang guard, not a speed claim: a tour takes seconds; this only ends a stuck one.
HANG_GUARD_S = 600
# Lines of the run's output shown when a tour fails: the failing command and what it said.
SHOWN_LINES = 80


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    text: str


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def fence_end(lines: list[str], start: int) -> int:
    """The index of the line closing the fence opened at ``start`` (len(lines) if none)."""
    fence = re.match(r"^(`{3,}|~{3,})", lines[start].strip())
    assert fence is not None
    for end in range(start + 1, len(lines)):
        if lines[end].strip() == fence.group(1):
            return end
    return len(lines)


def tour_blocks(path: Path) -> list[Block]:
    """The fenced blocks marked as the tour, in document order; a stray marker is an error.

    A marker inside another fenced block (an example of the convention) is text, not a marker.
    """
    lines = path.read_text("utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if re.match(r"^(`{3,}|~{3,})", lines[i].strip()):
            i = fence_end(lines, i) + 1
            continue
        if lines[i].strip() != MARKER:
            i += 1
            continue
        fence = i + 1
        while fence < len(lines) and not lines[fence].strip():
            fence += 1
        opening = lines[fence].strip() if fence < len(lines) else ""
        if opening not in ("```sh", "```bash"):
            raise AssertionError(
                f"{path.name}:{i + 1}: {MARKER} must be followed by a ```sh block, got {opening!r}"
            )
        end = fence_end(lines, fence)
        if end == len(lines):
            raise AssertionError(f"{path.name}:{fence + 1}: the tour block is never closed")
        blocks.append(Block(fence + 1, "\n".join(lines[fence + 1 : end])))
        i = end + 1
    return blocks


TOURS = [doc for doc in documents() if tour_blocks(doc)]


def test_the_readme_and_the_tour_page_have_tours() -> None:
    """Losing a marker must not silently turn a tour off."""
    names = {doc.relative_to(REPO).as_posix() for doc in TOURS}
    assert {"README.md", "docs/tour.md"} <= names, names


def test_no_tour_block_installs_anything() -> None:
    """The set-up commands stay out of the tours: the test never runs pip."""
    for doc in TOURS:
        for block in tour_blocks(doc):
            assert "pip install" not in block.text, f"{doc.name}:{block.line}"


def script_of(doc: Path) -> str:
    rel = doc.relative_to(REPO).as_posix()
    parts = [
        "set -euo pipefail",
        # Named on failure: the command, its exit status and where it stands in the document.
        "trap 'echo \"tour command failed (exit $?): $BASH_COMMAND\" >&2' ERR",
        "set -x",
    ]
    for block in tour_blocks(doc):
        parts.append(f": '{rel} line {block.line}'")
        parts.append(block.text)
    return "\n".join(parts) + "\n"


def tour_env(tmp_path: Path) -> dict[str, str]:
    # Nothing of the caller's ledger leaks in: no KERNELINDEX_* but the fresh ones below.
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELINDEX_")}
    for folder in ("home", "user"):
        (tmp_path / folder).mkdir()
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "kernelindex").exists(), f"no kernelindex beside {sys.executable}"
    env.update(
        KERNELINDEX_HOME=str(tmp_path / "home"),
        KERNELINDEX_DB=f"sqlite:///{tmp_path / 'ledger.db'}",
        HOME=str(tmp_path / "user"),
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        COLUMNS="120",
    )
    return env


def end_group(process: subprocess.Popen[bytes]) -> None:
    """End every process the tour started (a server it left running included)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; others of its group may not be yet.
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return


@pytest.mark.parametrize("doc", TOURS, ids=[d.relative_to(REPO).as_posix() for d in TOURS])
def test_tour_runs_top_to_bottom_in_a_fresh_home(doc: Path, tmp_path: Path) -> None:
    script = tmp_path / "tour.sh"
    script.write_text(script_of(doc), "utf-8")
    process = subprocess.Popen(
        ["bash", str(script)],
        cwd=REPO,
        env=tour_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, ended below
    )
    try:
        out, _ = process.communicate(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        end_group(process)
        out, _ = process.communicate()
        pytest.fail(f"{doc.name}: the tour hung\n" + tail(out))
    finally:
        end_group(process)
    if process.returncode != 0:
        logs = "".join(log_tail(log) for log in sorted((tmp_path / "home").glob("*.log")))
        pytest.fail(f"{doc.name}: the tour failed (exit {process.returncode})\n" + tail(out) + logs)


def log_tail(log: Path) -> str:
    """What a server the tour started wrote to its log (the tours send it to the home)."""
    lines = log.read_text("utf-8", "replace").splitlines()[-30:]
    return f"\n--- {log.name} (last lines) ---\n" + "\n".join(lines)


def tail(out: bytes) -> str:
    """The output from the last command traced before the failure, at most SHOWN_LINES."""
    lines = out.decode("utf-8", "replace").splitlines()
    # Where in the document: the block the failing command belongs to.
    blocks = [m.group(1) for line in lines if (m := re.match(r"^\+ : '(.+ line \d+)'$", line))]
    where = f"in the tour block at {blocks[-1]}:\n" if blocks else ""
    # From the last top-level command's trace line, so its own output is shown whole.
    top = [i for i, line in enumerate(lines) if line.startswith("+ ")]
    start = top[-1] if top else 0
    return where + "\n".join(lines[start:][-SHOWN_LINES:])
