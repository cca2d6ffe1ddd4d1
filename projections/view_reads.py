"""The views' reads that run on a ``Rows`` (``ledger.store.read_door``), each one of the
generated statements of ``projections.view_statements`` (defined in
``projections.view_queries``): the server and a full command run them on their session's
connection (``projections.queries.rows_of``), a short command on its driver's, so every face
runs the same text (issue 33).

Imports no SQLAlchemy: that is what lets a short command read through the driver.
"""

from __future__ import annotations

import json
from typing import Any

from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.errors import AmbiguousReferenceError, NotFoundError
from ledger.store.read_door import Rows
from projections.reference_text import MIN_PREFIX, SHOWN, digest_prefix
from projections.rows import BoardRow, GroupHeading, GroupRow, OperationGroupRow, RunRow, Standing
from projections.view_statements import STATEMENTS, VIEWS_VERSION

# Every run's evidence order is at least this: the floor of a board asked for no level.
_ANY_LEVEL = int(min(EvidenceLevel))


def views_fresh(rows: Rows) -> bool:
    """Whether the views answer as a command's catch-up would leave them (this build's, every
    event of the log folded, every group ranked): then a read of them through the driver
    answers as the full path would, which first folds what is new. Read in ``rows``'s
    snapshot, so the reads after it see the same log."""
    found = rows.run(STATEMENTS, "views_state")
    if len(found) != 1:
        return False
    version, behind, stale = found[0]
    return version == VIEWS_VERSION and not behind and not stale


def leaderboard(
    rows: Rows,
    key: str,
    view: View,
    min_level: EvidenceLevel | None = None,
    *,
    offset: int = 0,
    limit: int | None = None,
) -> list[BoardRow]:
    """Ranked runs of a comparison group, best first (ties by run digest); a page of them
    from ``offset`` when ``limit`` is given."""
    asked: dict[str, Any] = {"key": key, "view": str(view), "min_order": _min_order(min_level)}
    if limit is None and offset:
        raise ValueError("a board from an offset is a page: give its limit")
    found = (
        rows.run(STATEMENTS, "board", **asked)
        if limit is None
        else rows.run(STATEMENTS, "board_page", **asked, limit=limit, offset=offset)
    )
    return [BoardRow.from_values(r) for r in found]


def ranked_count(rows: Rows, key: str, view: View, min_level: EvidenceLevel | None = None) -> int:
    found = rows.run(
        STATEMENTS, "ranked_count", key=key, view=str(view), min_order=_min_order(min_level)
    )
    return int(found[0][0])


def _min_order(min_level: EvidenceLevel | None) -> int:
    return int(min_level) if min_level is not None else _ANY_LEVEL


def group_heading(rows: Rows, key: str) -> GroupHeading | None:
    """Benchmark, GPU and metric of one comparison group, with its number of runs."""
    found = rows.run(STATEMENTS, "group_heading", key=key)
    return GroupHeading.from_values(found[0]) if found else None


def group_exists(rows: Rows, key: str) -> bool:
    """Whether any run of the views is in comparison group ``key``."""
    return bool(rows.run(STATEMENTS, "group_exists", key=key))


def group_identity(rows: Rows, key: str) -> tuple[str | None, str | None, str] | None:
    """Benchmark, GPU product and source of one comparison group (None: no such group)."""
    found = rows.run(STATEMENTS, "group_identity", key=key)
    if not found:
        return None
    benchmark, product, source = found[0]
    return benchmark, product, str(source)


def group_has_authors(rows: Rows, key: str) -> bool:
    """Whether any run of the group names its author (a board can then show each one's best)."""
    return bool(rows.run(STATEMENTS, "group_has_authors", key=key))


def resolve_group(rows: Rows, reference: str) -> str:
    """The comparison key ``reference`` (a key or a unique prefix of one) names."""
    prefix = digest_prefix(reference)
    if prefix is None:
        raise NotFoundError(
            f"{reference!r} is not a comparison key or a prefix of one "
            f"(sha256: and at least {MIN_PREFIX} hex digits)"
        )
    keys = [
        str(k) for (k,) in rows.run(STATEMENTS, "group_keys", pattern=prefix + "%", limit=SHOWN + 1)
    ]
    if not keys:
        raise NotFoundError(f"no comparison group has a key starting {prefix}")
    if len(keys) > 1:
        raise AmbiguousReferenceError(
            f"{prefix} starts {len(keys) if len(keys) <= SHOWN else 'more than ' + str(SHOWN)}"
            " comparison keys: " + ", ".join(k[:23] + "…" for k in keys[:SHOWN])
        )
    return keys[0]


def operation_groups(rows: Rows, benchmark: str) -> list[OperationGroupRow]:
    """The comparison groups of one operation with each group's #1 (source-native)."""
    found = rows.run(STATEMENTS, "operation_groups", benchmark=benchmark)
    return [OperationGroupRow.from_values(r) for r in found]


# The leaderboard's groups and GPUs, and its operation's definition (helper board).

_GROUPS = {
    (False, False): "groups",
    (True, False): "groups_of_benchmark",
    (False, True): "groups_on_product",
    (True, True): "groups_of_benchmark_on_product",
}


def groups(rows: Rows, benchmark: str | None = None, product: str | None = None) -> list[GroupRow]:
    """Comparison groups, by benchmark, GPU and key: those of ``benchmark`` and/or on the
    GPU ``product`` when given."""
    name = _GROUPS[benchmark is not None, product is not None]
    asked = {k: v for k, v in (("benchmark", benchmark), ("product", product)) if v is not None}
    return [GroupRow.from_values(r) for r in rows.run(STATEMENTS, name, **asked)]


def products(rows: Rows) -> list[str]:
    """Every GPU product a run of the views names, sorted."""
    return sorted(str(p) for (p,) in rows.run(STATEMENTS, "products"))


def operation_spec_digests(rows: Rows, benchmark: str) -> set[str]:
    """The OperationSpec digests the workloads of ``benchmark``'s runs name."""
    found = set()
    for (document,) in rows.run(STATEMENTS, "operation_workloads", benchmark=benchmark):
        digest = (json.loads(document).get("spec") or {}).get("operationSpecDigest")
        if isinstance(digest, str):
            found.add(digest)
    return found


# What the views say of one run (helper "runs": ``kernelindex show`` through the door).
def run_row(rows: Rows, digest: str) -> RunRow | None:
    """The run's row of the runs view (None: the views do not hold it)."""
    found = rows.run(STATEMENTS, "run_row", digest=digest)
    return RunRow.from_values(found[0]) if found else None


def standings(rows: Rows, digest: str) -> dict[str, Standing]:
    """The run's place in each view of its group's ranking, by view."""
    found = rows.run(STATEMENTS, "run_standings", digest=digest)
    return {
        str(view): Standing(str(view), int(rank), int(of), float(value), json.loads(tied))
        for view, rank, of, value, tied in found
    }


def top_of_group(rows: Rows, key: str, view: View) -> str | None:
    """The group's #1 in ``view`` (among runs tied at #1, the smallest digest)."""
    found = rows.run(STATEMENTS, "group_top", key=key, view=str(view))
    return str(found[0][0]) if found else None
