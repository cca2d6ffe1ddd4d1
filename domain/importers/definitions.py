"""A source's published definition (SOL-ExecBench, FlashInfer-Bench ``definition.json``):
which ``OperationSpec`` it is, and the reference implementation it gives.

The spec an importer makes of a definition keeps only the reference's language (as the
catalog's specs do: the code would change the spec's digest). The definition itself is kept
as an artifact (``records.definition_artifact``, or inside a rerun workload artifact); a
reader shows its code for a spec only when the definition maps to exactly that spec.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from domain.manifests.canonical_form import manifest_digest


def definition_spec_digests(definition: Mapping[str, Any]) -> set[str]:
    """The OperationSpec digests ``definition`` maps to, under each importer that reads
    definitions; a mapping that cannot read it gives none."""
    # Loaded on use: only a page that shows a reference implementation maps a definition.
    from domain.importers.fields import RECORD_ERRORS  # noqa: PLC0415
    from domain.importers.flashinfer_trace.definition import operation_spec  # noqa: PLC0415
    from domain.importers.sol_execbench import map_definition  # noqa: PLC0415

    found: set[str] = set()
    with contextlib.suppress(*RECORD_ERRORS):
        found.add(map_definition(definition, [], with_suite=False).operation_digest)
    with contextlib.suppress(*RECORD_ERRORS):
        found.add(manifest_digest(operation_spec(definition)))
    return found


def reference_code(definition: Mapping[str, Any]) -> str | None:
    """The reference implementation's source the definition gives (None: none)."""
    code = definition.get("reference")
    return code if isinstance(code, str) and code.strip() else None
