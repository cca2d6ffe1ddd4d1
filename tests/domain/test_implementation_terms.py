"""An implementation's terms as its manifest states them (``domain.implementation_terms``):
the license concluded, else declared, and whether a build variant says how to install it.
The oracle for the rule is the KernelIndex catalog's own ``licenseExpression`` and
``installable`` columns, read from the same manifests, on every implementation it holds."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import zstandard

from domain.implementation_terms import is_installable, license_of

CATALOG = "fixtures/kernelindex-catalog/catalog-2026-08-16-0022af0b.jsonl.zst"


def _implementation(spec: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "ImplementationRevision", "metadata": {"name": "x"}, "spec": spec}


def test_the_license_is_the_one_concluded_else_the_one_declared() -> None:
    both = {"licensing": {"declared": "MIT", "concluded": "Apache-2.0"}}
    assert license_of(_implementation(both)) == "Apache-2.0"
    assert license_of(_implementation({"licensing": {"declared": " MIT "}})) == "MIT"
    unstated: list[dict[str, Any]] = [
        {},
        {"licensing": {}},
        {"licensing": {"declared": "  "}},
        {"licensing": "MIT"},
    ]
    for spec in unstated:
        assert license_of(_implementation(spec)) is None, spec
    assert license_of(None) is None and license_of({"spec": []}) is None


def test_installable_means_a_build_variant_says_how() -> None:
    pip = {"buildVariants": [{"name": "wheel", "install": {"kind": "pip", "package": "k"}}]}
    assert is_installable(_implementation(pip))
    not_installable: list[dict[str, Any]] = [
        {},
        {"buildVariants": []},
        {"buildVariants": [{"name": "x"}]},
    ]
    for spec in not_installable:
        assert not is_installable(_implementation(spec)), spec
    assert not is_installable(None)


def test_the_rule_gives_the_catalogs_columns_on_every_implementation(shared: Path) -> None:
    seen = 0
    with (shared / CATALOG).open("rb") as raw:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw), "utf-8")
        for line in reader:
            item = json.loads(line)
            if item["table"] != "implementations":
                continue
            row = item["row"]
            assert license_of(row["manifest"]) == row["licenseExpression"], row["id"]
            assert is_installable(row["manifest"]) == row["installable"], row["id"]
            seen += 1
    assert seen == 4_250
