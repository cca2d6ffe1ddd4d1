"""Heads leaves keep the log a plain C2SP tlog: Go's sumdb client (``golang.org/x/mod/sumdb``,
through ``tests/interop/tlogcheck``) accepts the checkpoints of a ledger with heads leaves on,
the heads leaf's inclusion in each (its data as a verifier rebuilds it), and the consistency
of the trees; one flipped byte of the leaf's map root and it refuses the inclusion."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from domain.statements import Role
from ledger.application import Ledger
from ledger.proofs.heads_map import heads_leaf_data
from ledger.proofs.signed_note import verifier_key_string
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.store.heads_leaves import heads_at
from tests.interop.test_independent_clients import check, tlogcheck  # noqa: F401 - a fixture
from tests.witness.ledger_witnesses import NOW, Operator, clock


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def test_go_accepts_a_heads_leaf_ledgers_checkpoints_and_heads_leaves(
    db_url: str,
    tlogcheck: Path,
) -> None:
    operator = Operator.make()
    ledger = Ledger(db_url, operator.root, log_key=operator.log, clock=clock)
    try:
        ledger.tlog.enable_heads_leaf()
        admin = operator.admin
        ledger.append(key_registration_envelope(admin.public, [Role.ADMIN], admin, now=NOW))
        notes: list[str] = []
        inclusion: list[dict[str, Any]] = []
        for count in (2, 3):
            for _ in range(count):
                key = SigningKey.generate()
                ledger.append(
                    key_registration_envelope(key.public, [Role.ATTESTER], admin, now=NOW)
                )
            signed = ledger.tlog.checkpoint()
            notes.append(signed.note)
            index = signed.size - 1
            with ledger.store.transaction(commit=False) as session:
                root = heads_at(session, ledger.store.events, index).map.root()
                proof = ledger.tlog.proof_hashes(session, index, signed.size)
            data = heads_leaf_data(operator.root.origin, index, root)
            inclusion.append(
                {
                    "size": signed.size,
                    "root": _b64(signed.root),
                    "index": index,
                    "data": _b64(data),
                    "proof": [_b64(h) for h in proof],
                }
            )
        first, second = (int(n.split("\n")[1]) for n in notes)
        with ledger.store.transaction(commit=False) as session:
            hashes = ledger.tlog.consistency(session, first, second)
            roots = [ledger.tlog.root(session, s) for s in (first, second)]
    finally:
        ledger.close()
    document = {
        "vkey": verifier_key_string(operator.root.origin, operator.root.log_key.raw),
        "notes": notes,
        "inclusion": inclusion,
        "consistency": [
            {
                "size1": first,
                "root1": _b64(roots[0]),
                "size2": second,
                "root2": _b64(roots[1]),
                "proof": [_b64(h) for h in hashes],
            }
        ],
    }
    results = check(tlogcheck, document)
    assert len(results) == 2 + 2 + 1 and all(r["ok"] for r in results), results
    # Each append is a commit of one event and its heads leaf: 1 + 2, then 3 more commits.
    assert (first, second) == (6, 12)
    tampered = dict(inclusion[0])
    text = base64.b64decode(tampered["data"]).decode().split("\n")
    text[3] = _b64(bytes([base64.b64decode(text[3])[0] ^ 1]) + base64.b64decode(text[3])[1:])
    tampered["data"] = _b64("\n".join(text).encode())
    (refused,) = check(tlogcheck, {"vkey": document["vkey"], "inclusion": [tampered]})
    assert not refused["ok"]
