"""``audit`` checks each event's fold fields row (``ledger.store.fold_fields``) against the
event it was made of, on SQLite and PostgreSQL.

Rebuilt views read the rows, not the events, so an altered row would make them differ from
what the events say without anything else noticing. ``audit`` remakes each row from its
stored event with the function the commit and the backfill use and compares bytes: a row
that differs is a ``fold-fields`` failure at its position (``kernelindex audit`` exits 1); a
missing row is no finding (the fold decodes the event itself, to the same views). The
shared manifest documents rows name by key are checked against their keys.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from projection_world import MANIFESTS, NAMES, SEED, Clock, World
from sqlalchemy import create_engine, delete, select, text, update
from test_rebuild_from_fold_fields import drop_rows, fold_rows, rebuilt, shared_bodies
from test_rebuild_property import FIXED_SCRIPTS, KEYS, NOW, build_steps, feed, interleave, steps_of
from typer.testing import CliRunner

from api.cli.main import app
from ledger.audit import audit_ledger
from ledger.signing.authoring import attachment_envelope, ingestion_envelope
from ledger.store.fold_fields import FoldFields, decode_fields, encode_fields, event_fold_fields
from ledger.store.fold_manifests import fold_manifests
from ledger.verification_report import Check, Report

DIFFERS = "fold fields row is not the one its stored event makes (rebuilt views would differ)"
BARE_SEED = {role: doc for role, doc in MANIFESTS[SEED].items() if role != "workload"}


@pytest.fixture
def world(db_url: str) -> Iterator[World]:
    """Keys, runs ingested, attested, attached to, superseded, rerun: every kind of event,
    each with the row its commit wrote."""
    w = World.create(db_url, KEYS, Clock(NOW))
    w.append(ingestion_envelope(BARE_SEED, w.keys.ingester, now=w.clock.now))
    attached = {"workload": MANIFESTS[SEED]["workload"]}
    w.append(attachment_envelope(SEED, NAMES[SEED], attached, w.keys.ingester, now=w.clock.now))
    lengths = [1 + sum(steps_of(op) for op in s) for s in FIXED_SCRIPTS[1:]]
    round_robin = [r for k in range(max(lengths)) for r, n in enumerate(lengths) if k < n]
    steps = build_steps(w, [[], *FIXED_SCRIPTS[1:]])[1:]
    feed(w, interleave([[*s] for s in steps], round_robin))
    yield w
    w.close()


def audit(world: World) -> Report:
    return audit_ledger(world.ledger)


def fold_findings(report: Report) -> list[tuple[str, str]]:
    return [(f.where, f.reason) for f in report.findings if f.check == Check.FOLD_FIELDS]


def store_row(world: World, position: int, row: bytes) -> None:
    """Write a row behind the ledger's back."""
    with world.ledger.store.transaction(commit=True) as session:
        session.execute(
            update(event_fold_fields)
            .where(event_fold_fields.c.position == position)
            .values(fields=row)
        )


def altered(world: World, position: int, **changes: Any) -> None:
    fields = decode_fields(fold_rows(world)[position])
    store_row(world, position, encode_fields(msgspec.structs.replace(fields, **changes)))


def test_an_untouched_ledger_audits_clean_with_every_row_checked(world: World) -> None:
    rows = fold_rows(world)
    assert set(rows) == set(range(1, world.count() + 1))
    report = audit(world)
    assert report.verified, report.findings
    assert report.passed[Check.FOLD_FIELDS] == world.count()
    assert report.failed[Check.FOLD_FIELDS] == 0


def test_an_altered_signer_fails_at_its_position(world: World) -> None:
    position = max(p for p, r in fold_rows(world).items() if decode_fields(r).name)
    altered(world, position, signer="ed25519:someone-else")
    report = audit(world)
    assert not report.verified
    assert report.failed[Check.FOLD_FIELDS] == 1
    assert fold_findings(report) == [
        (
            f"position {position}",
            DIFFERS + ": signer",
        )
    ]
    # Only the row is wrong: the events, their leaves and the tree all check.
    assert set(report.failed) == {Check.FOLD_FIELDS}


def test_an_altered_predicate_text_fails_at_its_position(world: World) -> None:
    rows = fold_rows(world)
    position = next(p for p, r in rows.items() if decode_fields(r).name == "Run.Attested")
    predicate = json.loads(decode_fields(rows[position]).predicate)
    predicate["body"] = "rewritten in the side table"
    altered(world, position, predicate=json.dumps(predicate).encode())
    report = audit(world)
    assert fold_findings(report) == [
        (
            f"position {position}",
            DIFFERS + ": predicate",
        )
    ]
    # The same predicate with only its text respaced: still not the bytes the event signs.
    store_row(world, position, rows[position])
    assert audit(world).verified
    respaced = json.dumps(json.loads(decode_fields(rows[position]).predicate), indent=1)
    altered(world, position, predicate=respaced.encode())
    assert [w for w, _ in fold_findings(audit(world))] == [f"position {position}"]


def test_a_damaged_row_fails_and_says_it_does_not_decode(world: World) -> None:
    store_row(world, 5, b"\xc1 not msgpack")
    ((where, reason),) = fold_findings(audit(world))
    assert where == "position 5"
    assert reason.startswith(DIFFERS + ": the row does not decode")


def test_a_row_for_an_event_that_makes_none_fails(world: World) -> None:
    """An event whose stored fields are not a run event's strings gets no row at commit;
    a row beside it was put there by someone else (the edited event fails ``leaf`` too)."""
    position = next(p for p, r in fold_rows(world).items() if decode_fields(r).name)
    engine = create_engine(world.db_url)
    try:
        with engine.begin() as conn:
            state = json.loads(
                bytes(
                    conn.execute(
                        text("select state from kernelindex_events where id = :i"),
                        {"i": position},
                    ).scalar_one()
                )
            )
            state["received_at"] = 12
            conn.execute(
                text("update kernelindex_events set state = :s where id = :i"),
                {"s": json.dumps(state).encode(), "i": position},
            )
    finally:
        engine.dispose()
    report = audit(world)
    assert fold_findings(report) == [
        (
            f"position {position}",
            "a fold fields row beside an event the commit makes none of (inserted?)",
        )
    ]
    assert report.failed[Check.LEAF] == 1


def test_a_deleted_row_audits_clean_and_folds_the_same(world: World) -> None:
    views = world.views()
    rows = fold_rows(world)
    gone = sorted(random.Random(5).sample(sorted(rows), 4))
    drop_rows(world, gone)
    report = audit(world)
    assert report.verified, report.findings
    assert report.passed[Check.FOLD_FIELDS] == len(rows) - len(gone)
    assert rebuilt(world) == views


def test_a_sweep_of_altered_rows_each_found_at_its_own_position(world: World) -> None:
    """A row of each kind of event, altered alone (in a field of its own), fails at exactly
    its position; put back, the ledger audits clean again."""
    rows = fold_rows(world)
    by_name: dict[str | None, int] = {}
    for position, row in sorted(rows.items()):
        by_name.setdefault(decode_fields(row).name, position)
    assert len(by_name) >= 6, by_name
    changes: list[dict[str, Any]] = [
        {"received_at": "2000-01-01T00:00:00Z"},
        {"subject": "sha256:" + "0" * 64},
        {"name": "Run.Retracted"},
        {"superseded_by": "sha256:" + "1" * 64},
        {"predicate": b"null"},
        {"signer": ""},
    ]
    for k, (name, position) in enumerate(sorted(by_name.items(), key=lambda kv: kv[1])):
        change = changes[k % len(changes)]
        fields = decode_fields(rows[position])
        if any(getattr(fields, f) == v for f, v in change.items()) or name is None:
            change = {"name": "Run.Attested" if name is None else None}
        store_row(world, position, encode_fields(msgspec.structs.replace(fields, **change)))
        report = audit(world)
        assert [w for w, _ in fold_findings(report)] == [f"position {position}"], (name, change)
        assert set(report.failed) == {Check.FOLD_FIELDS}
        store_row(world, position, rows[position])
    assert audit(world).verified


def test_cli_audit_exits_1_naming_the_altered_row(
    tmp_path: Path, db_url: str, seed_path: Path
) -> None:
    env = {
        "KERNELINDEX_HOME": str(tmp_path / "home"),
        "KERNELINDEX_DB": db_url,
        "KERNELINDEX_KEY_PASSPHRASE": "",
    }
    runner = CliRunner()

    def cli(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args), env=env)
        assert result.exit_code == code, f"{args}: exit {result.exit_code}\n{result.output}"
        return result.stdout

    cli("init")
    cli("ingest", str(seed_path))
    assert "VERIFIED" in cli("audit")
    engine = create_engine(db_url)
    try:
        with engine.begin() as conn:
            position, row = conn.execute(
                select(event_fold_fields.c.position, event_fold_fields.c.fields)
                .order_by(event_fold_fields.c.position.desc())
                .limit(1)
            ).one()
            fields: FoldFields = decode_fields(bytes(row))
            assert fields.name == "Run.Ingested"
            conn.execute(
                update(event_fold_fields)
                .where(event_fold_fields.c.position == position)
                .values(fields=encode_fields(msgspec.structs.replace(fields, signer="x")))
            )
    finally:
        engine.dispose()
    out = cli("audit", code=1)
    assert "FAILED" in out
    assert (f"fold-fields at position {position}: {DIFFERS}: signer") in out
    report = json.loads(cli("audit", "--json", code=1))
    assert report["checks"]["fold-fields"] == {"passed": position - 1, "failed": 1}


def test_an_edited_shared_manifest_fails_naming_it_and_a_missing_one_is_no_finding(
    world: World,
) -> None:
    """The rows name shared manifest documents by the sha256 of their text: a document
    edited behind the ledger's back fails under its key; one deleted is no finding (the
    events naming it fold from their state, as an event with no row does)."""
    bodies = shared_bodies(world)
    assert bodies
    key, body = sorted(bodies.items())[0]
    edited = body.replace(b'"spec"', b'"spec" ', 1)
    with world.ledger.store.transaction(commit=True) as session:
        session.execute(
            update(fold_manifests).where(fold_manifests.c.digest == key).values(body=edited)
        )
    report = audit(world)
    assert fold_findings(report) == [
        ("sha256:" + key.hex(), "shared fold manifest is not the document its key names (edited?)")
    ]
    assert set(report.failed) == {Check.FOLD_FIELDS}
    with world.ledger.store.transaction(commit=True) as session:
        session.execute(delete(fold_manifests).where(fold_manifests.c.digest == key))
    report = audit(world)
    assert report.verified, report.findings
    assert report.passed[Check.FOLD_FIELDS] == world.count()
