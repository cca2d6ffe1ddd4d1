"""Who a run is by, and what its source calls itself, read back from what the run itself says.

A run's implementation, project and revision are facts of its implementation manifest. A run
ingested without one (the seed, ingested from its run page's manifests alone) still says them
in its own record, in the form its source's importer writes: a SOL-ExecBench leaderboard run
is titled ``"<user> · <kernel> · <gpu>"`` and named ``sol-submission-<id>``, and the
implementation that importer writes for it is ``"<user>"``'s revision ``submission-<id>``
(:mod:`domain.importers.sol_leaderboard.submission`). :func:`identity_from_run` reads those
back; a reader marks them as the run's source record's, not a manifest's, and an import of
the source attaches the manifest itself later (``ledger.importing``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from domain.sources import GPUMODE_KERNELBOT as KERNELBOT
from domain.sources import SOL_EXECBENCH as SOL

SEPARATOR: Final = " · "


@dataclass(frozen=True)
class SourceIdentity:
    """Implementation, project and revision as a run's own record states them (None: the
    record does not say)."""

    implementation: str | None
    project: str | None
    revision: str | None
    # Fields of the implementation manifest the source's importer writes, by the path a
    # comparison names them (``implementation.metadata.name``), that the record states.
    fields: Mapping[str, str] = field(default_factory=dict)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def identity_from_run(run: Mapping[str, Any]) -> SourceIdentity | None:
    """The identity a run manifest states in its source's form, or None where its source
    has no such form (or the run does not follow it)."""
    spec = _mapping(run.get("spec"))
    metadata = _mapping(run.get("metadata"))
    native = _mapping(spec.get("sourceNative"))
    external, benchmark = _text(native.get("externalId")), _text(native.get("benchmark"))
    title = _text(metadata.get("title")) or ""
    if native.get("source") == SOL and external is not None and external.isdigit():
        # "<user> · <kernel> · <gpu>": the user is what precedes the kernel's name.
        marker = f"{SEPARATOR}{benchmark}{SEPARATOR}" if benchmark else None
        user = title[: title.index(marker)] if marker and marker in title else None
        revision = f"submission-{external}"
        fields = {
            "implementation.metadata.name": f"sol-submission-{external}",
            "implementation.spec.projectRevision.version": revision,
        }
        if user:
            fields["implementation.metadata.title"] = f"{user}{SEPARATOR}{benchmark}"
            fields["implementation.metadata.authors[0].name"] = user
        return SourceIdentity(user or None, user or None, revision, fields)
    if native.get("source") == KERNELBOT and external and external.startswith("submission/"):
        return SourceIdentity(None, None, "submission-" + external.removeprefix("submission/"))
    return None
