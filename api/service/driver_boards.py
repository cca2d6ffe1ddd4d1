"""``api.service.boards.Boards``'s leaderboard and groups, read through the driver (issue 33):
the same functions (``api.service.board_pages``) on a short command's driver connection,
where the views are fresh (``api.service.driver_reads``).

Loads the boards' reads only when asked: ``keys list`` opens the same door and needs none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.store.read_door import Rows

if TYPE_CHECKING:
    from api.service.board_orders import Order
    from api.service.models.views import GroupSummary, Leaderboard
    from domain.evidence import EvidenceLevel
    from domain.ranking import View


class DriverBoards:
    """``Boards.leaderboard`` and ``Boards.groups``, as they answer, through the driver."""

    def __init__(self, rows: Rows) -> None:
        self.rows = rows

    def leaderboard(
        self,
        reference: str,
        view: View,
        min_level: EvidenceLevel | None,
        start: int,
        limit: int,
        order: Order,
        per_user: bool,
    ) -> Leaderboard:
        from api.service.board_pages import board_page  # noqa: PLC0415 - see the docstring

        board, _ = board_page(self.rows, reference, view, start, limit, min_level, order, per_user)
        return board

    def groups(self, benchmark: str | None, gpu: str | None) -> list[GroupSummary]:
        from api.service.board_pages import group_summaries  # noqa: PLC0415 - as above

        return group_summaries(self.rows, benchmark, gpu)
