"""The writer process's Unix socket fits in a socket address whatever TMPDIR is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.writer_process import WriterProcess
from ledger.writer_wire import socket_folder


def test_a_short_temporary_directory_is_used_as_it_is() -> None:
    assert socket_folder("/var/tmp") == "/var/tmp"


@pytest.mark.parametrize("depth", [60, 80, 200])
def test_a_deep_temporary_directory_falls_back_to_tmp(depth: int) -> None:
    deep = "/" + "d" * depth
    folder = socket_folder(deep)
    assert folder == (deep if depth + 40 <= 107 else "/tmp")


def test_the_writer_socket_path_fits_under_a_deep_tmpdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("t" * 100)
    deep.mkdir()
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    writer = WriterProcess(tmp_path, "sqlite:///unused.db")
    try:
        assert len(os.fsencode(writer.address)) <= 107
        assert writer.address.startswith("/tmp/kernelindex-writer-")
    finally:
        writer.stop()
