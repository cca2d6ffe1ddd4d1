"""Attack review of the writer wire: a request body not marked ``checked_wire.TAG`` is
unpickled by the writer process. The verdict binding (``SignatureVerdict.matches``) assumes a
worker's word may be wrong; a pickle that names any callable would let that worker run code
in the writer instead: the writer's unpickler loads only the project's own value classes."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import struct
from pathlib import Path

import pytest

from ledger.checked_wire import decode_request
from ledger.home import LedgerHome
from ledger.receipt import Receipt
from ledger.writer_process import WriterProcess
from ledger.writer_wire import MAX_REQUEST_BYTES, BrokenFrameError, Inbox
from tests.server.test_writer_process import _note, _raw, _registered


class _Made:
    """Unpickled, calls ``os.mkdir(path)``: any callable a pickle names runs as it loads."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.mkdir, (self.path,))


def test_a_pickled_request_runs_no_code_in_the_writer(
    writer: tuple[WriterProcess, LedgerHome, str], tmp_path: Path
) -> None:
    """LOW, fixed (defence in depth): a worker that sends a pickle (the wire's fallback for
    what msgpack does not carry) naming a callable is cut off; the writer calls nothing."""
    process, _, seed = writer
    good, alice = _registered(process)
    made = tmp_path / "made-by-the-writer"
    bad = _raw(process)
    try:
        bad.send_bytes(pickle.dumps((1, _Made(str(made)))))
        assert bad.poll(30), "the writer read the request: it answers it, or cuts it off"
        receipt = good.append(_note(seed, alice, "after the pickle"))  # the writer read it
        assert isinstance(receipt, Receipt)
    finally:
        bad.close()
        good.close()
    assert not made.exists(), "the writer process ran a callable a worker's pickle named"


def _refused_name(module: str, name: str) -> None:
    """A pickle naming ``module.name`` (protocol 4's STACK_GLOBAL, which follows dotted
    names) fails to load in the writer."""
    body = (
        b"\x80\x04"
        + b"\x8c" + bytes([len(module)]) + module.encode()
        + b"\x8c" + bytes([len(name)]) + name.encode()
        + b"\x93."
    )  # fmt: skip
    with pytest.raises(pickle.UnpicklingError):
        decode_request(body)


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("ledger.signing.dsse", "msgspec.Struct"),  # a dotted name out of the project
        ("ledger.checked_wire", "enum.Enum"),
        ("ledger.checked_wire", "dataclasses.FrozenInstanceError"),
        ("ledger.application", "OperationalError"),  # eventsourcing's, imported there
    ],
)
def test_a_pickle_names_only_the_projects_own_classes(module: str, name: str) -> None:
    """Attack review: the module named was checked, then a dotted name or a class another
    package defined (imported into a project module) loaded all the same."""
    _refused_name(module, name)


@pytest.mark.parametrize(
    "header",
    [
        struct.pack("!i", -1) + struct.pack("!Q", 1 << 40),  # the 8-byte form
        struct.pack("!i", MAX_REQUEST_BYTES + 1),  # the 4-byte form, one over
    ],
)
def test_a_frame_over_the_largest_request_is_refused_from_its_header(header: bytes) -> None:
    """Attack review: a header promising 2^40 bytes, then a flood, was buffered (1 GiB was
    held before the test stopped); the writer now cuts that worker off at the header."""
    ours, theirs = multiprocessing.Pipe()
    try:
        inbox = Inbox(ours)
        os.write(theirs.fileno(), header + b"x" * 4096)
        with pytest.raises(BrokenFrameError):
            inbox.fill()
    finally:
        ours.close()
        theirs.close()
