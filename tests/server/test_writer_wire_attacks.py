"""Attack review of the writer wire: a request body not marked ``checked_wire.TAG`` is
unpickled by the writer process. The verdict binding (``SignatureVerdict.matches``) assumes a
worker's word may be wrong; a pickle that names any callable would let that worker run code
in the writer instead: the writer's unpickler loads only the project's own value classes."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from ledger.home import LedgerHome
from ledger.receipt import Receipt
from ledger.writer_process import WriterProcess
from tests.server.test_writer_process import _note, _raw, _registered, writer  # noqa: F401


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
