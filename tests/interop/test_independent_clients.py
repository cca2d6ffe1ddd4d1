"""The project's formats checked by other people's code (issue 13, docs/design.md §3).

- Go's reference implementation of signed notes and transparency-log proofs
  (``golang.org/x/mod/sumdb/note`` and ``sumdb/tlog``, the Go checksum database's own
  client code), built offline from Debian's ``golang-golang-x-mod-dev`` by
  ``tests/interop/tlogcheck``: it must accept every checkpoint, heads note, inclusion proof
  and consistency proof the server hands out, and reject each of them with one byte flipped.
- ``securesystemslib``'s DSSE implementation: every envelope of an exported bundle verifies
  under its signer's registered key, and none with a byte of its payload flipped.

Without a Go toolchain and x/mod these skip, saying how to install them; ``.ci/run``
installs them and sets KERNELINDEX_REQUIRE_GO=1, so CI fails instead of skipping.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from served_app import Served, serve

from domain.statements import Role
from ledger.home import LedgerHome
from ledger.proofs.log_entries import LogEntry
from ledger.proofs.signed_note import verifier_key_string
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.keys import SigningKey

HERE = Path(__file__).resolve().parent
SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
GOPATHS = ("/usr/share/gocode", str(Path.home() / "go"))


@pytest.fixture(scope="session")
def tlogcheck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go checker, built once, offline (GOPATH mode: no module proxy is reachable)."""
    go = shutil.which("go")
    gopath = next(
        (p for p in GOPATHS if (Path(p) / "src/golang.org/x/mod/sumdb/tlog").is_dir()), None
    )
    if go is None or gopath is None:
        why = (
            "Go's reference client needs the go toolchain and golang.org/x/mod "
            "(apt-get install golang-go golang-golang-x-mod-dev; .ci/run does)"
        )
        if os.environ.get("KERNELINDEX_REQUIRE_GO") == "1":
            pytest.fail(why)
        pytest.skip(why)
    out = tmp_path_factory.mktemp("go") / "tlogcheck"
    env = os.environ | {
        "GO111MODULE": "off",
        "GOPATH": gopath,
        "GOCACHE": str(out.parent / "cache"),
        "GOFLAGS": "",
    }
    build = subprocess.run(
        [go, "build", "-o", str(out), str(HERE / "tlogcheck" / "main.go")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    return out


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[Served]:
    """The demo ledger behind the API, with more events (a few attesters' notes)."""
    for s in serve(LedgerHome.at(tmp_path / "home", db_url)):
        keys = [SigningKey.generate() for _ in range(3)]
        for key in keys:
            s.ledger.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
        for i in range(7):
            s.ledger.append(
                attestation_envelope(
                    SEED, "sol-submission-38823", keys[i % 3], type_="note", body=f"n{i}"
                )
            )
        yield s


def check(tlogcheck: Path, document: dict[str, Any]) -> list[dict[str, Any]]:
    run = subprocess.run(
        [str(tlogcheck)],
        input=json.dumps(document),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    results: list[dict[str, Any]] = json.loads(run.stdout)
    return results


def flip(text: str, at: int) -> str:
    """``text`` (base64 or a note) with one byte changed, still decodable."""
    raw = bytearray(base64.b64decode(text)) if not text.endswith("\n") else None
    if raw is None:
        chars = list(text)
        chars[at] = "A" if chars[at] != "A" else "B"
        return "".join(chars)
    raw[at % len(raw)] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def served_material(s: Served) -> dict[str, Any]:
    """What the server hands out: checkpoints, a bundle's heads, and proofs of every kind."""
    c = s.client
    first = c.get("/v1/log/checkpoint").json()
    s.ledger.append(
        attestation_envelope(SEED, "sol-submission-38823", _attester(s), type_="note", body="z")
    )
    latest = c.get("/v1/log/checkpoint").json()
    size = latest["size"]
    bundle = [json.loads(x) for x in c.get("/v1/bundle", params={"run": SEED}).text.splitlines()]
    heads = next(r["note"] for r in bundle if r["type"] == "heads")
    inclusion = []
    for r in bundle:
        if r["type"] != "event":
            continue
        entry = LogEntry(
            r["position"], r["aggregate"], r["version"], r["topic"], r["envelope"], r["receivedAt"]
        )
        bundle_size = int(
            next(x for x in bundle if x["type"] == "checkpoint")["note"].split("\n")[1]
        )
        proof = c.get(
            "/v1/log/proofs/inclusion", params={"leaf": r["leafIndex"], "size": bundle_size}
        ).json()
        assert proof["hashes"] == r["proof"]  # the API and the bundle give the same proof
        inclusion.append(
            {
                "size": bundle_size,
                "root": proof["rootHash"],
                "index": r["leafIndex"],
                "data": base64.b64encode(entry.data()).decode(),
                "proof": r["proof"],
            }
        )
    consistency = []
    for old in (1, 2, first["size"] // 2, first["size"], size - 1):
        reply = c.get("/v1/log/proofs/consistency", params={"old": old, "new": size}).json()
        consistency.append(
            {
                "size1": reply["size1"],
                "root1": reply["root1"],
                "size2": reply["size2"],
                "root2": reply["root2"],
                "proof": reply["hashes"],
            }
        )
    root = s.ledger.trust_root
    return {
        "vkey": verifier_key_string(root.origin, root.log_key.raw),
        "notes": [first["note"], latest["note"], heads],
        "inclusion": inclusion,
        "consistency": consistency,
        "_bundle": bundle,
    }


def _attester(s: Served) -> SigningKey:
    key = SigningKey.generate()
    s.ledger.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
    return key


def test_go_accepts_every_checkpoint_heads_note_and_proof_the_server_gives(
    served: Served, tlogcheck: Path
) -> None:
    material = served_material(served)
    document = {k: v for k, v in material.items() if not k.startswith("_")}
    results = check(tlogcheck, document)
    assert len(results) == 3 + len(document["inclusion"]) + len(document["consistency"])
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]
    notes = [r for r in results if r["kind"] == "note"]
    assert notes[1]["size"] > notes[0]["size"]
    assert notes[2]["text"].startswith("kernelindex-heads/v1\n")
    # A receipt's own inclusion proof, as a writer gets it, checks out in Go too.
    key = _attester(served)
    envelope = attestation_envelope(SEED, "sol-submission-38823", key, type_="note", body="r")
    receipt = served.client.post(f"/v1/runs/{SEED}/attestations", json=envelope).json()
    stored = served.ledger.stored_records(served.ledger.run(SEED).id, version=receipt["version"])  # type: ignore[union-attr]
    entry = LogEntry.from_stored(
        stored[0].position,
        str(stored[0].aggregate_id),
        receipt["version"],
        stored[0].topic,
        stored[0].state,
    )
    log = receipt["log"]
    item = {
        "size": log["treeSize"],
        "root": log["rootHash"],
        "index": log["leafIndex"],
        "data": base64.b64encode(entry.data()).decode(),
        "proof": log["hashes"],
    }
    (only,) = check(tlogcheck, {"vkey": document["vkey"], "inclusion": [item]})
    assert only["ok"], only


def test_go_rejects_each_of_them_with_one_byte_flipped(served: Served, tlogcheck: Path) -> None:
    material = served_material(served)
    vkey = material["vkey"]
    notes = []
    for note in material["notes"]:
        text_end = note.index("\n\n")
        notes += [flip(note, 1), flip(note, text_end - 3), flip(note, len(note) - 6)]
    inclusion = []
    for item in material["inclusion"]:
        inclusion.append(item | {"data": flip(item["data"], 7)})
        inclusion.append(item | {"root": flip(item["root"], 3)})
        if item["proof"]:
            inclusion.append(item | {"proof": [flip(item["proof"][0], 5), *item["proof"][1:]]})
    consistency = []
    for item in material["consistency"]:
        consistency.append(item | {"root1": flip(item["root1"], 9)})
        if item["proof"]:
            consistency.append(item | {"proof": [*item["proof"][:-1], flip(item["proof"][-1], 0)]})
    results = check(
        tlogcheck,
        {"vkey": vkey, "notes": notes, "inclusion": inclusion, "consistency": consistency},
    )
    assert len(results) == len(notes) + len(inclusion) + len(consistency)
    accepted = [r for r in results if r["ok"]]
    assert not accepted, accepted


def test_securesystemslib_verifies_every_envelope_of_a_bundle(served: Served) -> None:
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey

    lines = served.client.get("/v1/bundle", params={"run": SEED}).text.splitlines()
    events = [r for r in map(json.loads, lines) if r["type"] == "event"]
    keys: dict[str, SSlibKey] = {}
    for r in events:  # the bundle's own key events name every signer's public key
        payload = json.loads(base64.b64decode(r["envelope"]["payload"]))
        if r["topic"].endswith("Principal.Registered"):
            p = payload["predicate"]
            raw = base64.b64decode(p["publicKey"])
            keys[p["keyId"]] = SSlibKey(p["keyId"], "ed25519", "ed25519", {"public": raw.hex()})
    assert len(events) >= 10
    for r in events:
        keyid = r["envelope"]["signatures"][0]["keyid"]
        envelope = Envelope.from_dict(copy.deepcopy(r["envelope"]))  # from_dict consumes it
        assert set(envelope.verify([keys[keyid]], 1)) == {keyid}
        tampered = dict(r["envelope"], payload=flip(r["envelope"]["payload"], 11))
        with pytest.raises(VerificationError):
            Envelope.from_dict(copy.deepcopy(tampered)).verify([keys[keyid]], 1)
