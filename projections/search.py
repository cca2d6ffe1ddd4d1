"""Finding comparison groups among thousands: ``kernelindex search`` and ``/search``.

Every word of the query must match (case-insensitively, as a substring) something a run of
the group says about itself: its benchmark or operation, GPU product (``B200``), name,
title, source, author, evidence level, external id, its protocol (stack version) or its
workload (axes, dtypes, shapes: the workload manifest's text). Results are groups, biggest
first, each with its label and its #1 in the source-native view.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session, aliased

from domain.ranking import View
from projections.group_labels import GroupLabel, group_labels
from projections.queries import leaders
from projections.tables import manifests, ranks, runs

MAX_WORDS = 8
MAX_GROUPS = 50


@dataclass(frozen=True)
class Found:
    label: GroupLabel
    runs: int
    top_run: str | None
    top_name: str | None
    top_value: float | None
    unit: str | None


def query_words(query: str) -> list[str]:
    words = [w for w in re.split(r"\s+", query.strip()) if w][:MAX_WORDS]
    # LIKE's own wildcards in a word are matched literally (autoescape below).
    return [w.lower() for w in words]


def search_groups(session: Session, query: str, limit: int = MAX_GROUPS) -> list[Found]:
    words = query_words(query)
    if not words:
        return []
    protocol = aliased(manifests)
    workload = aliased(manifests)
    searchable = (
        runs.c.benchmark,
        runs.c.product,
        runs.c.name,
        runs.c.title,
        runs.c.source,
        runs.c.author,
        runs.c.evidence_level,
        runs.c.external_id,
        protocol.c.document,
        workload.c.document,
    )
    matches = and_(
        *(
            or_(*(func.lower(column).contains(word, autoescape=True) for column in searchable))
            for word in words
        )
    )
    counted = session.execute(
        select(runs.c.comparison_key, func.count().label("runs"))
        .select_from(runs)
        .outerjoin(protocol, protocol.c.digest == runs.c.protocol_digest)
        .outerjoin(workload, workload.c.digest == runs.c.workload_digest)
        .where(runs.c.comparison_key.is_not(None), matches)
        .group_by(runs.c.comparison_key)
        .order_by(func.count().desc(), runs.c.comparison_key)
        .limit(limit)
    ).all()
    keys = [str(r.comparison_key) for r in counted]
    labels = {label.key: label for label in group_labels(session, keys)}
    first = leaders()
    tops = {
        str(r.comparison_key): r
        for r in session.execute(
            select(
                first.c.comparison_key, first.c.run_digest, ranks.c.value, runs.c.name, runs.c.unit
            )
            .join(
                ranks,
                (ranks.c.run_digest == first.c.run_digest)
                & (ranks.c.view == str(View.SOURCE_NATIVE)),
            )
            .join(runs, runs.c.run_digest == first.c.run_digest)
            .where(first.c.comparison_key.in_(keys))
        )
    }
    found = []
    for row in counted:
        key = str(row.comparison_key)
        top = tops.get(key)
        found.append(
            Found(
                label=labels[key],
                runs=int(row.runs),
                top_run=str(top.run_digest) if top is not None else None,
                top_name=str(top.name) if top is not None else None,
                top_value=float(top.value) if top is not None else None,
                unit=str(top.unit) if top is not None and top.unit else None,
            )
        )
    return found


def search_result(query: str, found: list[Found]) -> dict[str, Any]:
    """What ``kernelindex search --json`` and ``GET /v1/search`` answer."""
    labels = [f.label for f in found]
    return {
        "query": query,
        "groups": [
            {
                "comparisonKey": f.label.key,
                "benchmark": f.label.benchmark,
                "product": f.label.product,
                "parts": f.label.parts,
                "apartBy": (
                    f.label.separated_by(alike) if (alike := f.label.lookalikes(labels)) else None
                ),
                "runs": f.label.runs,
                "matchingRuns": f.runs,
                "top": {"run": f.top_run, "name": f.top_name, "value": f.top_value, "unit": f.unit},
            }
            for f in found
        ],
    }
