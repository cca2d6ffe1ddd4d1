"""A small demo ledger: the seed run and its comparison group, an attester and an attestation.

Safe to run again: every step is idempotent (identical envelopes are not re-appended, an
existing home and key are reused).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from api.run_intake import ingest_run
from domain.manifests.manifest_set import check_manifest_set
from domain.statements import Role
from ledger.application import Ledger
from ledger.errors import AlreadyExistsError
from ledger.home import HomeError, LedgerHome
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.keys import SigningKey
from projections.runner import ProjectionRunner

SEED_FILE = "run-38823.manifest.json"
COHORT_FILE = "sol-056-cohort.json"
DEMO_HOME = Path(".kernelindex-demo")
DEMO_ORIGIN = "kernelindex.local/demo"


def demo_home(home: Path | None, db: str | None) -> LedgerHome:
    """Where ``demo`` and ``serve --demo`` build: the --home and --db given, else
    ./.kernelindex-demo with its own SQLite file. Never $KERNELINDEX_HOME or $KERNELINDEX_DB
    alone: they name a user's own ledger, which a demo must not write into."""
    path = (home or DEMO_HOME).expanduser().resolve()
    return LedgerHome(path, db or f"sqlite:///{path / 'ledger.db'}")


def _data(name: str) -> Any:
    return json.loads(resources.files("api.demo_data").joinpath(name).read_text("utf-8"))


def seed_manifests() -> dict[str, Any]:
    manifests: dict[str, Any] = _data(SEED_FILE)
    return manifests


def _ingest(ledger: Ledger, home: LedgerHome, manifests: dict[str, Any]) -> str:
    try:
        return ingest_run(ledger, manifests, home.key("ingester")).receipt.subject_digest
    except AlreadyExistsError:
        return check_manifest_set(manifests).run_digest


def build_demo(home: LedgerHome) -> tuple[Ledger, str]:
    """Create (or reuse) the demo ledger at ``home``; return it and the seed run's digest.
    A home that holds a ledger of another origin is refused: the demo writes only its own."""
    if home.exists and (origin := home.trust_root().origin) != DEMO_ORIGIN:
        raise HomeError(
            f"{home.path} holds the ledger {origin!r}, not a demo ({DEMO_ORIGIN!r}): the demo "
            "builds only in a home of its own (give --home a new folder)"
        )
    ledger = home.open() if home.exists else home.initialise(origin=DEMO_ORIGIN)
    cohort = _data(COHORT_FILE)
    # The catalog runs on the seed's workload, then the seed as `kernelindex ingest` takes
    # it: the workload it names by digest comes from the ledger, so it joins their group.
    for manifests in cohort["cohort"]:
        _ingest(ledger, home, manifests)
    run_digest = _ingest(ledger, home, seed_manifests())
    run = ledger.run(run_digest)
    assert run is not None
    attester_path = home.path / "keys" / "demo-attester.pem"
    if not attester_path.exists():
        SigningKey.generate().save(Path(attester_path))
    attester = SigningKey.load(attester_path)
    if ledger.key_state(attester.key_id) is None:
        ledger.append(
            key_registration_envelope(attester.public, [Role.ATTESTER], attester, label="demo")
        )
    if run.attestation_count == 0:
        ledger.append(
            attestation_envelope(
                run_digest,
                run.run_name,
                attester,
                type_="environment_note",
                body="Demo attestation: the source reports this run on NVIDIA B200 with "
                "SOL-ExecBench stack v1.1. Attestations never change the evidence level.",
            )
        )
    ProjectionRunner(ledger).catch_up()
    return ledger, run_digest
