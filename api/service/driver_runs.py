"""A run's reads through the database driver alone (issue 33): ``kernelindex show`` and
``history`` on fresh views. Each is the function the full service calls on its session's
connection (``Runs.record`` runs ``api.service.run_reads.run_read``, ``History.run``
``api.service.run_history.run_history``), here on the driver's, with each signer's key
folded from its events as the same snapshot holds them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.signing.trust import TrustRoot
from ledger.store.read_door import Rows

if TYPE_CHECKING:
    from api.service.models.history import RunHistory
    from api.service.models.runs import RunRecord


class DriverRuns:
    """``Runs.record`` and ``History.run``, read through the driver."""

    def __init__(self, rows: Rows, trust_root: TrustRoot) -> None:
        self.rows = rows
        self.trust_root = trust_root

    def history(self, reference: str, start: int, limit: int) -> RunHistory:
        # Imported here: the key list's door loads no read model or run fold.
        from api.service.run_history import run_history  # noqa: PLC0415
        from ledger.history_reads import rows_keys  # noqa: PLC0415

        keys = rows_keys(self.rows)
        return run_history(self.rows, reference, keys, self.trust_root, start, limit)

    def record(self, reference: str) -> RunRecord:
        from api.service.run_reads import run_read  # noqa: PLC0415 - as above
        from api.service.sweeps import SweepPlaces  # noqa: PLC0415
        from ledger.history_reads import rows_keys  # noqa: PLC0415

        keys = rows_keys(self.rows)
        # One command's memo of sweep places: any position keys it (the service's memo
        # lives across reads, and keys on the views' position).
        found = run_read(self.rows, reference, keys, self.trust_root, SweepPlaces(), lambda: 0, "")
        return found.record()
