"""The manifest kinds and the API version, without their models (cheap to import)."""

from __future__ import annotations

from typing import Final

API_VERSION: Final = "kernelindex.dev/v1alpha1"

# The kinds of docs/design.md §4, one model (a msgspec Struct) each in ``domain.manifests.models``.
MANIFEST_KINDS: Final = (
    "BenchmarkRun",
    "BenchmarkProtocol",
    "ExecutionEnvironment",
    "ImplementationRevision",
    "OperationSpec",
    "WorkloadCase",
    "WorkloadSuite",
    "SoftwareProject",
    "ModelRevision",
    "ServingConfiguration",
    "ServingRun",
    "ServingStackRevision",
    "ServingWorkload",
)

# ECMA-262 ``\s``: WhiteSpace (incl. every Unicode Zs and U+FEFF) plus LineTerminator.
ECMA_WHITESPACE: Final = (
    "[\t\n\x0b\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
)
