"""What a person types to name a run or a comparison group, resolved the same everywhere.

A run is named by its full digest, a unique digest prefix (at least 4 hex digits, with or
without ``sha256:``), its name (``sol-submission-38823``) or its source's id (``38823``,
``sol-execbench#38823``); a group by its comparison key or a unique prefix of it. The CLI,
the pages and the API all call these, so one reference means one thing on every interface;
an ambiguous one is refused with the candidates and what tells them apart.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_, select

from domain.run_references import SOURCE_ID
from ledger.errors import AmbiguousReferenceError, NotFoundError
from ledger.store.event_store import StoreSession
from projections.reference_text import MIN_PREFIX, SHOWN, digest_prefix
from projections.tables import runs


def _describe(row: Any) -> str:
    source = f"{row.source} #{row.external_id}" if row.external_id else row.source
    return f"{row.run_digest[:19]}… {row.name} · {source} · {row.product} · {row.benchmark}"


def _matching(session: StoreSession, conditions: list[Any]) -> list[Any]:
    return list(
        session.execute(
            select(
                runs.c.run_digest,
                runs.c.name,
                runs.c.source,
                runs.c.external_id,
                runs.c.product,
                runs.c.benchmark,
            )
            .where(or_(*conditions))
            .order_by(runs.c.run_digest)
            .limit(SHOWN + 1)
        ).all()
    )


def resolve_run(session: StoreSession, reference: str) -> str:
    """The digest of the one run ``reference`` names in the views. A name or the source's
    id is tried first, a digest prefix only when nothing is named so (an id like ``38823``
    is also hex, and must not collide with digest prefixes)."""
    ref = reference.strip()
    if not ref:
        raise NotFoundError("give a run digest, a digest prefix, a run name or an external id")
    named = [runs.c.name == ref, runs.c.external_id == ref]
    if (qualified := SOURCE_ID.fullmatch(ref)) is not None:
        named.append(
            and_(runs.c.source == qualified["source"], runs.c.external_id == qualified["id"])
        )
    rows = _matching(session, named)
    prefix = digest_prefix(ref)
    if not rows and prefix is not None:
        rows = _matching(session, [runs.c.run_digest.startswith(prefix, autoescape=True)])
    if not rows:
        hint = "" if prefix or len(ref) >= MIN_PREFIX else f" (a prefix needs {MIN_PREFIX}+ hex)"
        raise NotFoundError(
            f"no run has the digest, digest prefix, name or external id {ref!r}{hint}"
        )
    if len(rows) > 1:
        more = "" if len(rows) <= SHOWN else "; and more (give more of the digest)"
        raise AmbiguousReferenceError(
            f"{ref!r} names {'more than ' if len(rows) > SHOWN else ''}"
            f"{min(len(rows), SHOWN)} runs: " + "; ".join(_describe(r) for r in rows[:SHOWN]) + more
        )
    return str(rows[0].run_digest)
