"""The progress bar on a terminal: drawn from the command's own thread (issue 36). rich's
refresh thread made ``kernelindex verify`` start its workers cold: the verifier's pool forks
only from a process with no other thread (``ledger.verify.pool``)."""

from __future__ import annotations

import io
import threading

import pytest
from rich.console import Console

from api.cli import console


def test_a_bar_on_a_terminal_draws_its_progress_and_starts_no_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    screen = io.StringIO()
    monkeypatch.setattr(
        console, "err", Console(file=screen, force_terminal=True, width=80, emoji=False)
    )
    before = threading.active_count()
    with console.progress_bar("verifying") as bar:
        task = bar.add_task("verifying", total=10)
        for n in range(1, 11):
            bar.update(task, completed=n)
            assert threading.active_count() == before
    drawn = screen.getvalue()
    assert "verifying" in drawn and "1/10" in drawn  # the first update is drawn at once


def test_off_a_terminal_there_is_no_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = io.StringIO()
    monkeypatch.setattr(console, "err", Console(file=screen, force_terminal=False))
    with console.progress_bar("verifying") as bar:
        bar.update(bar.add_task("verifying", total=3), completed=3)
    assert screen.getvalue() == ""
