"""A ledger that asks witnesses, end to end, on SQLite and PostgreSQL: its commits cosigned by
our witnesses over HTTP in the background, bundles that carry the cosigned checkpoint, and
``verify`` holding them to a witness policy — a split view caught, a witness that is down
costing only the cosigned checkpoint's freshness, never a write."""

from __future__ import annotations

import base64
import io
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from domain.statements import Role
from ledger.application import Ledger
from ledger.bundle import export_bundle
from ledger.home import LedgerHome
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store.log_queries import cosigned_checkpoint_json
from ledger.verification_report import Check, Report
from ledger.verify import Outcome, VerificationPolicy, outcome_of, verify_bundle_lines
from ledger.witness.policy import Policy, parse_policy
from ledger.witness.witness import Witness, origin_hash
from ledger.writer_process import RemoteWriter, WriterProcess
from tests.witness.ledger_witnesses import (
    ORIGIN,
    LocalWitness,
    Operator,
    all_serving,
    follows,
    local_witnesses,
)


def policy_text(root: TrustRoot, witnesses: list[LocalWitness], rule: str) -> str:
    lines = [f"witness {w.name} {w.vkey}" for w in witnesses]
    names = " ".join(w.name for w in witnesses)
    return "\n".join([*lines, f"group all-of-us {rule} {names}", "quorum all-of-us"]) + "\n"


def bundle_of(ledger: Ledger, size: int | None = None) -> list[dict[str, Any]]:
    out = io.StringIO()
    export_bundle(ledger, out, size=size)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def verify(records: list[dict[str, Any]], root: TrustRoot, policy: Policy | None) -> Report:
    lines = [json.dumps(r) + "\n" for r in records]
    held = VerificationPolicy(trust_root=root, witness_policy=policy)
    return verify_bundle_lines(lines, held, workers=1)


@pytest.fixture
def operator() -> Operator:
    return Operator.make()


@pytest.fixture
def three(tmp_path: Path) -> list[LocalWitness]:
    return local_witnesses(tmp_path / "witnesses", 3)


@pytest.fixture
def serving(three: list[LocalWitness], operator: Operator) -> Iterator[list[Witness]]:
    with all_serving(three, [follows(operator.root)]) as witnesses:
        yield witnesses


def test_a_split_view_is_cosigned_at_most_once_and_its_bundle_fails_the_policy(
    db_url: str,
    other_db_url: str,
    operator: Operator,
    three: list[LocalWitness],
    serving: list[Witness],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two ledgers with one origin and log key, the same first 2 leaves, then others: both
    ask the same three witnesses. Each witness cosigns the first ledger's tree and refuses
    the other's as inconsistent (evidence kept); the first's bundle meets a 2-of-3 policy,
    the other's fails ``witnessed``, by name."""
    shown, hidden = operator.ledger(db_url), operator.ledger(other_db_url)
    operator.register(shown, 2)
    operator.register(hidden, 2)
    endpoints = [w.endpoint for w in three]
    try:
        honest = shown.start_witnessing(endpoints, poll=3600)
        assert [o and o.outcome for o in honest.round()] == ["cosigned"] * 3
        other = hidden.start_witnessing(endpoints, poll=3600)
        with caplog.at_level(logging.ERROR):
            outcomes = other.round()
        assert [o and (o.outcome, o.alarm) for o in outcomes] == [("inconsistent", True)] * 3
        assert all(s.alarm and s.cosigned_size == 0 for s in other.status())
        assert "422 from old size 4" in caplog.text
        shown_note = shown.tlog.checkpoint().note
        for witness in serving:
            assert witness.cosigned_size(ORIGIN) == 4
            latest = witness.latest(origin_hash(ORIGIN))
            assert latest is not None and latest.startswith(shown_note)
            assert [e.status for e in witness.evidence()] == [409, 422]

        policy = parse_policy(policy_text(operator.root, three, "2"))
        good = verify(bundle_of(shown), operator.root, policy)
        assert outcome_of(good) is Outcome.VERIFIED and good.passed[Check.WITNESSED] == 1
        assert good.facts["witnessed"].startswith("yes: quorum all-of-us of --policy met at 4")

        bad = verify(bundle_of(hidden), operator.root, policy)
        assert outcome_of(bad) is Outcome.FAILED
        assert [(f.check, f.reason) for f in bad.findings] == [
            (
                Check.WITNESSED,
                "quorum 'all-of-us' not met: cosigned by no witness (the witness policy "
                "from --policy)",
            )
        ]
        # A bundle of an earlier tree carries the later cosigned checkpoint, with the proof
        # that it extends the bundle's; a proof that does not fails the same check.
        earlier = bundle_of(shown, size=2)
        assert [r["type"] for r in earlier[2:4]] == ["checkpoint", "witnessed"]
        assert outcome_of(verify(earlier, operator.root, policy)) is Outcome.VERIFIED
        first = bytearray(base64.b64decode(earlier[3]["proof"][0]))
        first[0] ^= 1
        earlier[3]["proof"][0] = base64.b64encode(bytes(first)).decode()
        broken = verify(earlier, operator.root, policy)
        assert outcome_of(broken) is Outcome.FAILED
        assert [f.where for f in broken.findings] == ["witnessed line", "checkpoint of 2 leaves"]

        # Without a policy the same bundle verifies, and says it proves no one else's view.
        alone = verify(bundle_of(hidden), operator.root, None)
        assert outcome_of(alone) is Outcome.VERIFIED
        assert alone.facts["witnessed"] == "no (no witness policy given)"
        assert any(n.startswith("UNWITNESSED") for n in alone.notes)
    finally:
        shown.close()
        hidden.close()


def test_a_witness_that_is_down_never_blocks_a_write_and_the_cosigned_size_lags(
    db_url: str, tmp_path: Path
) -> None:
    """A home with three witnesses, one never started: every write is taken at once, two
    witnesses cosign the newest checkpoint, the third is reported unavailable;
    with every witness gone, writes go on and the cosigned checkpoint stays where it was,
    the reader saying by how much it lags."""
    witnesses = local_witnesses(tmp_path / "witnesses", 3)
    home = LedgerHome.at(tmp_path / "home", db_url)
    home.initialise(witnesses=[(w.vkey, w.url) for w in witnesses]).close()
    policy = home.witness_policy()
    assert policy is not None and policy.quorum == "witnesses"
    root = home.trust_root()
    admin = home.key("admin")
    with all_serving(witnesses[:2], [follows(root)]):
        ledger = home.open(witnessing=True, poll=0.05, retry=0.05, max_backoff=0.2)
        try:
            for _ in range(3):
                newcomer = SigningKey.generate()
                receipt = ledger.append(
                    key_registration_envelope(newcomer.public, [Role.ATTESTER], admin)
                )
                assert receipt.inclusion is not None  # the receipt never waits for a witness
            size = ledger.tlog.checkpoint().size
            # A witnessed ledger ends every commit with its heads leaf: init's 3 keys and
            # its leaf, then two leaves per append.
            assert size == 4 + 3 * 2
            witnessing = ledger.witnessing
            assert witnessing is not None
            # One round asked at once (after any background round in flight): the two up
            # cosign the newest tree, if the background has not already; the third fails.
            *up, down_outcome = [o and o.outcome for o in witnessing.round()]
            assert set(up) <= {"cosigned"} and down_outcome == "unavailable"
            states = {s.name: s for s in witnessing.status()}
            down = states[witnesses[2].name]
            assert (down.outcome, down.cosigned_size) == ("unavailable", 0)
            assert down.failures >= 1 and not down.alarm
            read = cosigned_checkpoint_json(ledger, policy)
            assert read["size"] == 10 and read["witnessLag"] == 0
            assert read["cosigned"]["witnesses"] == sorted(w.name for w in witnesses[:2])
        finally:
            ledger.close()
    # Every witness gone: the writes go on; the cosigned checkpoint is the one it was.
    ledger = home.open(witnessing=True, poll=0.05, retry=0.05, max_backoff=0.2)
    try:
        for _ in range(2):
            newcomer = SigningKey.generate()
            ledger.append(key_registration_envelope(newcomer.public, [Role.ATTESTER], admin))
        read = cosigned_checkpoint_json(ledger, policy)
        assert read["size"] == 14
        assert (read["cosigned"]["size"], read["witnessLag"]) == (10, 4)
        # No witness has seen the tree of 14: its bundle is not witnessed, and says so; the
        # bundle of the cosigned tree is.
        newest = verify(bundle_of(ledger), root, policy)
        assert outcome_of(newest) is Outcome.FAILED
        assert [f.check for f in newest.findings] == [Check.WITNESSED]
        cosigned = verify(bundle_of(ledger, size=10), root, policy)
        assert outcome_of(cosigned) is Outcome.VERIFIED
        assert cosigned.facts["witnessed"].startswith("yes: quorum witnesses of --policy met at 10")
    finally:
        ledger.close()


def test_the_writer_process_asks_the_homes_witnesses_after_each_commit(
    db_url: str, tmp_path: Path
) -> None:
    """`kernelindex serve`'s writer process opens the ledger with witnessing: a write handed
    to it gets its receipt at once, and the checkpoint it signed is cosigned soon after,
    readable by any other process."""
    witnesses = local_witnesses(tmp_path / "witnesses", 3)
    home = LedgerHome.at(tmp_path / "home", db_url)
    home.initialise(witnesses=[(w.vkey, w.url) for w in witnesses]).close()
    policy = home.witness_policy()
    with all_serving(witnesses, [follows(home.trust_root())]):
        process = WriterProcess(home.path, home.db_url).start()
        remote = RemoteWriter(process.address, process.key)
        try:
            alice = SigningKey.generate()
            receipt = remote.append(key_registration_envelope(alice.public, [Role.ATTESTER], alice))
            # Init's 3 keys and its heads leaf, this event and its commit's heads leaf.
            assert receipt.inclusion is not None and receipt.inclusion.tree_size == 6
            reader = home.open(read_only=True)
            try:
                deadline = time.monotonic() + 60
                while (read := cosigned_checkpoint_json(reader, policy))["witnessLag"] != 0:
                    assert time.monotonic() < deadline, read
                    time.sleep(0.05)
            finally:
                reader.close()
            assert read["cosigned"]["size"] == 6
            assert read["cosigned"]["witnesses"] == [w.name for w in witnesses]
        finally:
            remote.close()
            process.stop()
