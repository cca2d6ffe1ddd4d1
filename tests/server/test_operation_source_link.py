"""The operation page links to the source's definition only by an http(s) URL.

The link is the spec's ``metadata.sourceRefs[].url``: metadata is no part of a manifest's
digest, and a spec kept from an imported source (the KernelIndex catalog's operations, a
dataset's definitions) may carry any text there. A ``javascript:`` URL rendered as an
``href`` runs in the ledger's origin when clicked; the pages' one rule for outside links is
``safe_url`` (the run page's evidence links use it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient
from sqlalchemy import create_engine, delete, select

from api.server.app import create_app
from api.service import operation_specs
from domain.importers.records import MANIFEST_MEDIA_TYPE, Artifact
from ledger.home import LedgerHome
from ledger.store.artifacts import artifacts as table
from tests.cli_session import Cli
from tests.served_app import TEST_CONFIG

OPERATION = "fused_add_rmsnorm_h2048"
PUBLISHED = "https://example.org/definitions/fused_add_rmsnorm_h2048.json"
HOSTILE = "javascript:alert(document.domain)"


def _spec_linking(db_url: str, url: str) -> None:
    """The operation's kept spec replaced by the same spec (same digest) linking ``url``."""
    engine = create_engine(db_url)
    try:
        with engine.begin() as conn:
            kept = conn.execute(
                select(table.c.digest, table.c.content).where(
                    table.c.media_type == MANIFEST_MEDIA_TYPE,
                    table.c.name.in_(operation_specs.candidate_names(OPERATION)),
                )
            ).all()
            assert kept, "the import keeps the operation's spec"
            conn.execute(delete(table).where(table.c.digest.in_([d for d, _ in kept])))
            spec: dict[str, Any] = json.loads(bytes(kept[0][1]))
            spec["metadata"]["sourceRefs"] = [{"url": url}]
            made = Artifact(
                json.dumps(spec).encode(), MANIFEST_MEDIA_TYPE, spec["metadata"]["name"]
            )
            conn.execute(
                table.insert().values(
                    digest=made.digest,
                    media_type=made.media_type,
                    name=made.name,
                    size=len(made.content),
                    content=made.content,
                    stored_at="2026-12-06T00:00:00Z",
                )
            )
    finally:
        engine.dispose()


def _page(tmp_path: Path, db_url: str) -> str:
    ledger = LedgerHome.at(tmp_path / "home", db_url).open()
    try:
        with TestClient(create_app(ledger, TEST_CONFIG)) as client:
            assert client.get(f"/v1/operations/{OPERATION}").json()["about"] is not None
            page = client.get(f"/operations/{OPERATION}")
            assert page.status_code == 200
            return page.text
    finally:
        ledger.close()


def test_a_specs_source_url_that_is_not_http_is_no_link(
    db_url: str, tmp_path: Path, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    cli("import", "flashinfer-trace", shared / "fixtures/flashinfer-trace")

    _spec_linking(db_url, PUBLISHED)
    monkeypatch.setattr(operation_specs, "_FOUND", {})
    assert f'href="{PUBLISHED}"' in _page(tmp_path, db_url)

    # Metadata is outside the digest: the same spec, as a hostile export could carry it.
    _spec_linking(db_url, HOSTILE)
    monkeypatch.setattr(operation_specs, "_FOUND", {})
    assert "javascript:" not in _page(tmp_path, db_url)
