"""Where the tests find the vendored conformance data (conformance/README.md): one place."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFORMANCE = REPO / "conformance"
FIXTURES = CONFORMANCE / "fixtures"
VECTORS = CONFORMANCE / "vectors"
SCHEMAS = CONFORMANCE / "kernelindex-schemas"
CATALOG = FIXTURES / "kernelindex-catalog" / "catalog-2026-08-16-0022af0b.jsonl.zst"
SEED = FIXTURES / "seed" / "run-38823.manifest.json"
