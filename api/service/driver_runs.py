"""A run's reads through the database driver alone (issue 33): ``kernelindex history`` on
fresh views. Each is the function the full service calls on its session's connection
(``api.service.history.History.run`` runs ``api.service.run_history.run_history``), here on
the driver's, with each signer's key folded from its events as the same snapshot holds them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.signing.trust import TrustRoot
from ledger.store.read_door import Rows

if TYPE_CHECKING:
    from api.service.models.history import RunHistory


class DriverRuns:
    """``api.service.history.History``'s run pages, read through the driver."""

    def __init__(self, rows: Rows, trust_root: TrustRoot) -> None:
        self.rows = rows
        self.trust_root = trust_root

    def history(self, reference: str, start: int, limit: int) -> RunHistory:
        # Imported here: the key list's door loads no read model or run fold.
        from api.service.run_history import run_history  # noqa: PLC0415
        from ledger.history_reads import rows_keys  # noqa: PLC0415

        keys = rows_keys(self.rows)
        return run_history(self.rows, reference, keys, self.trust_root, start, limit)
