"""A group's receipts carry the proofs the stored log gives, though they are made from the
nodes the sequencing pass wrote, not read back (issue 16): each receipt's proof is the one the
store answers later for the same leaf and size, and it proves the leaf into the root a
reference Merkle tree computes from every stored leaf hash."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.demo import build_demo
from domain.statements import Role
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.logged_event import LoggedEvent
from ledger.proofs.reference import inclusion_proof, root
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.store.transparency_log import leaves

NAME = "sol-submission-38823"
# Group sizes that start and end on every kind of tree edge (odd, even, powers of two).
GROUPS = [1, 2, 3, 5, 8, 1, 13, 32, 7, 4, 16, 9]


@pytest.fixture
def ledger(db_url: str, tmp_path: Path) -> Iterator[tuple[Ledger, str, SigningKey]]:
    home = LedgerHome.at(tmp_path / "home", db_url)
    built, seed = build_demo(home)
    key = SigningKey.generate()
    built.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
    yield built, seed, key
    built.close()


def test_every_receipt_proof_is_the_stored_logs_proof(ledger: Any) -> None:
    built, seed, key = ledger
    receipts: list[LoggedEvent] = []
    for n, size in enumerate(GROUPS):
        envelopes = [
            attestation_envelope(seed, NAME, key, type_="note", body=f"g{n} e{i}")
            for i in range(size)
        ]
        for got in built.append_many(envelopes):
            assert isinstance(got, LoggedEvent), got
            receipts.append(got)
    with built.store.transaction() as session:
        hashes = [
            bytes(h)
            for h in session.execute(
                leaves.select().with_only_columns(leaves.c.leaf_hash).order_by(leaves.c.leaf_index)
            ).scalars()
        ]
        for receipt in receipts:
            proof = receipt.inclusion
            assert proof is not None
            stored = built.tlog.inclusion(session, proof.leaf_index, proof.tree_size)
            assert proof == stored
            assert proof.root == root(hashes[: proof.tree_size])
            assert list(proof.hashes) == inclusion_proof(
                proof.leaf_index, hashes[: proof.tree_size]
            )
