"""What a person's words name a run by, besides its digest: one rule for the views (which
look runs up by it, ``projections.references``) and for a client that must check that a
server's answer is about the run it was asked for (``api.client``), from the signed
ingestion alone."""

from __future__ import annotations

import re

# ``sol-execbench#38823`` or ``sol-execbench:38823``: a source's own id, qualified.
SOURCE_ID = re.compile(r"(?P<source>[a-z0-9][a-z0-9._-]*)\s*[#:]\s*(?P<id>\S.*)")


def names_run(reference: str, *, name: str, source: str, external_id: str | None) -> bool:
    """Whether ``reference`` names the run called ``name`` that ``source`` knows as
    ``external_id``: its name, its source's id, or that id qualified by the source."""
    ref = reference.strip()
    if ref == name or (external_id is not None and ref == external_id):
        return True
    qualified = SOURCE_ID.fullmatch(ref)
    return (
        qualified is not None
        and external_id is not None
        and qualified["source"] == source
        and qualified["id"] == external_id
    )
