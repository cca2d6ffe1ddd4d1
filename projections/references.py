"""What a person types to name a run or a comparison group, resolved the same everywhere.

A run is named by its full digest, a unique digest prefix (at least 4 hex digits, with or
without ``sha256:``), its name (``sol-submission-38823``) or its source's id (``38823``,
``sol-execbench#38823``); a group by its comparison key or a unique prefix of it. The CLI,
the pages and the API all call these, so one reference means one thing on every interface;
an ambiguous one is refused with the candidates and what tells them apart.
"""

from __future__ import annotations

from typing import Any

from domain.run_references import SOURCE_ID
from ledger.errors import AmbiguousReferenceError, NotFoundError
from ledger.store.read_door import Row, Rows
from projections.reference_text import MIN_PREFIX, SHOWN, digest_prefix
from projections.view_statements import STATEMENTS


def _describe(row: Row) -> str:
    digest, name, source, external_id, product, benchmark = row
    source = f"{source} #{external_id}" if external_id else source
    return f"{digest[:19]}… {name} · {source} · {product} · {benchmark}"


def resolve_run(rows: Rows, reference: str) -> str:
    """The digest of the one run ``reference`` names in the views. A name or the source's
    id is tried first, a digest prefix only when nothing is named so (an id like ``38823``
    is also hex, and must not collide with digest prefixes). Generated statements
    (``projections.view_queries``): every face, the driver's door too, runs this."""
    ref = reference.strip()
    if not ref:
        raise NotFoundError("give a run digest, a digest prefix, a run name or an external id")
    qualified = SOURCE_ID.fullmatch(ref)
    named: dict[str, Any] = {
        "ref": ref,
        "source": qualified["source"] if qualified else None,
        "id": qualified["id"] if qualified else None,
    }
    found = rows.run(STATEMENTS, "runs_named", **named)
    prefix = digest_prefix(ref)
    if not found and prefix is not None:
        found = rows.run(STATEMENTS, "runs_prefixed", pattern=prefix + "%")
    if not found:
        hint = "" if prefix or len(ref) >= MIN_PREFIX else f" (a prefix needs {MIN_PREFIX}+ hex)"
        raise NotFoundError(
            f"no run has the digest, digest prefix, name or external id {ref!r}{hint}"
        )
    if len(found) > 1:
        more = "" if len(found) <= SHOWN else "; and more (give more of the digest)"
        raise AmbiguousReferenceError(
            f"{ref!r} names {'more than ' if len(found) > SHOWN else ''}"
            f"{min(len(found), SHOWN)} runs: "
            + "; ".join(_describe(r) for r in found[:SHOWN])
            + more
        )
    return str(found[0][0])
