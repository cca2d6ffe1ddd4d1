"""Two KernelIndex catalog projects are two projects even when their display names agree.

The catalog keys a project by its id (and slug); its ``name`` is a display name that
different people share (the real export has two "steve"s and two "divc13"s, each a
different KernelBot user). A registry that gathers runs by that name alone would credit one
person's runs to another. Here two projects of the fixture's catalog, each with 8 runs, are
given one name: the registry must still list two projects of 8 runs each."""

from __future__ import annotations

import io
import json
from pathlib import Path

import zstandard

from tests.cli_session import Cli

CATALOG = "fixtures/kernelindex-catalog/catalog-2026-08-16-0022af0b.jsonl.zst"
KEPT = {"kitrak_rev.", "bloomberg9383"}  # two users' projects, 8 runs each in the export
SHARED_NAME = "kitrak_rev."


def _catalog_with_two_projects_of_one_name(shared: Path, out: Path) -> None:
    with (shared / CATALOG).open("rb") as raw:
        rows = [
            json.loads(line)
            for line in io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw))
        ]
    ids = {r["row"]["id"] for r in rows if r["table"] == "projects" and r["row"]["name"] in KEPT}
    implementations = {
        r["row"]["id"]
        for r in rows
        if r["table"] == "implementations" and r["row"]["projectId"] in ids
    }
    kept = []
    for r in rows:
        if r["table"] == "benchmark_runs" and r["row"]["implementationId"] not in implementations:
            continue
        if r["table"] == "projects" and r["row"]["id"] in ids:
            r["row"]["name"] = SHARED_NAME
        kept.append(json.dumps(r).encode() + b"\n")
    out.write_bytes(b"".join(kept))


def test_two_projects_sharing_a_name_are_not_merged(
    tmp_path: Path, db_url: str, shared: Path
) -> None:
    catalog = tmp_path / "catalog.jsonl"
    _catalog_with_two_projects_of_one_name(shared, catalog)
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    assert cli.json("import", "kernelindex-catalog", catalog)["new"] == 16
    listed = cli.json("projects")
    # Each project keeps its own 8 runs; none is credited with the other's.
    assert sorted(item["runs"] for item in listed["items"]) == [8, 8], listed
    # Each is named apart by its slug, and each name opens that project's own page.
    names = [item["name"] for item in listed["items"]]
    assert all(n.startswith(SHARED_NAME + " (") for n in names) and len(set(names)) == 2
    for name in names:
        assert cli.json("projects", name)["summary"]["runs"] == 8
