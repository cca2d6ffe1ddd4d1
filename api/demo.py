"""A small demo ledger: the seed run, a self-registered attester and one attestation.

Safe to run again: every step is idempotent (identical envelopes are not re-appended, an
existing home and key are reused).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from domain.statements import Role
from ledger.application import Ledger
from ledger.authoring import attestation_envelope, ingestion_envelope, key_registration_envelope
from ledger.errors import AlreadyExistsError
from ledger.home import LedgerHome
from ledger.keys import SigningKey

SEED_FILE = "run-38823.manifest.json"


def seed_manifests() -> dict[str, Any]:
    text = resources.files("api.demo_data").joinpath(SEED_FILE).read_text("utf-8")
    manifests: dict[str, Any] = json.loads(text)
    return manifests


def build_demo(home: LedgerHome) -> tuple[Ledger, str]:
    """Create (or reuse) the demo ledger at ``home``; return it and the seed run's digest."""
    ledger = home.open() if home.exists else home.initialise(origin="kernelindex.local/demo")
    try:
        receipt = ledger.append(ingestion_envelope(seed_manifests(), home.key("ingester")))
        run_digest = receipt.subject_digest
    except AlreadyExistsError:
        run_digest = next(d for d, name in ledger.run_index() if name == "sol-submission-38823")
    run = ledger.run(run_digest)
    assert run is not None
    attester_path = home.path / "keys" / "demo-attester.pem"
    if not attester_path.exists():
        SigningKey.generate().save(Path(attester_path))
    attester = SigningKey.load(attester_path)
    if ledger.key_record(attester.key_id) is None:
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
    return ledger, run_digest
