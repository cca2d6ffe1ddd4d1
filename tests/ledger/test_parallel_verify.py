"""The parallel offline verifier counts exactly what the in-process one counts.

One ledger of a few hundred events (SQLite) is built once and exported; each test verifies the
bundle, clean or with a fault injected, in this process (``workers=1``) and in two worker
processes with small batches (many batches in flight, key events between them), and requires
the same report: pass and failure counts, facts, notes, and the same findings in the same order.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import multiprocessing
import random
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.statements import Role
from domain.timestamps import format_time, utc_now
from ledger.application import Ledger
from ledger.bundle import export_bundle
from ledger.proofs.merkle import ProofError, inclusion_proof, leaf_hash, root, verify_inclusion
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
    key_revocation_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store.schema import upgrade
from ledger.verification_report import Report
from ledger.verify import BundleVerifier, VerificationPolicy, verify_bundle_lines
from ledger.verify import pool as _pool
from ledger.verify.batches import Batch, BatchResult
from ledger.verify.batches import verify_batch as _verify_batch
from ledger.verify.events import is_key_event
from ledger.verify.inclusion import InclusionChecker as _InclusionChecker
from ledger.verify.pool import pool_context as _pool_context

RUNS = 60
ATTESTATIONS = 3


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@dataclass(frozen=True)
class Bundle:
    lines: list[str]
    late_key: str  # attester whose revocation comes after its events, but dated before them
    late_revocation: int  # index in ``lines`` of that revocation


def _manifests(seed: dict[str, Any], i: int) -> dict[str, Any]:
    manifests = copy.deepcopy(seed)
    spec = manifests["run"]["spec"]
    spec["timing"]["latencyNs"]["mean"] += i
    spec["sourceNative"]["externalId"] = f"test-{i}"
    manifests["run"]["metadata"]["name"] = f"parallel-run-{i:04d}"
    return manifests


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory, seed_path: Path) -> Bundle:
    folder = tmp_path_factory.mktemp("parallel")
    start = utc_now() - timedelta(days=1)
    clock = Clock(start)
    admin, ingester, log = SigningKey.generate(), SigningKey.generate(), SigningKey.generate()
    attesters = [SigningKey.generate() for _ in range(3)]
    trust = TrustRoot(
        origin="test.kernelindex/parallel",
        admin_keys=(admin.public,),
        log_key=log.public,
        created_at=format_time(start),
    )
    upgrade(f"sqlite:///{folder / 'ledger.db'}")
    ledger = Ledger(f"sqlite:///{folder / 'ledger.db'}", trust, clock=clock, log_key=log)
    ledger.append(key_registration_envelope(admin.public, [Role.ADMIN], admin, now=start))
    ledger.append(key_registration_envelope(ingester.public, [Role.INGESTER], admin, now=start))
    seed = json.loads(seed_path.read_text())
    late = attesters[2]
    for i in range(RUNS):
        clock.now = start + timedelta(minutes=10 + i)
        if i == 5:  # keys registered between events, so batches must close around them
            for key in attesters:
                ledger.append(
                    key_registration_envelope(key.public, [Role.ATTESTER], key, now=clock.now)
                )
        manifests = _manifests(seed, i)
        run = ledger.append(ingestion_envelope(manifests, ingester, now=clock.now))
        name = manifests["run"]["metadata"]["name"]
        for j in range(ATTESTATIONS if i >= 5 else 0):
            key = attesters[(i + j) % len(attesters)]
            ledger.append(
                attestation_envelope(
                    run.subject_digest, name, key, type_="note", body=f"{i}/{j}", now=clock.now
                )
            )
    # The late attester's revocation is appended last but received "before" its attestations
    # (the clock went back, in another writer process, as after an NTP step): verifying it
    # retroactively would fail them all. One ledger object never stamps backwards.
    clock.now = start + timedelta(minutes=1)
    other_process = Ledger(f"sqlite:///{folder / 'ledger.db'}", trust, clock=clock, log_key=log)
    other_process.append(key_revocation_envelope(late.public, admin, reason="test", now=clock.now))
    clock.now = start + timedelta(minutes=20 + RUNS)
    other = SigningKey.generate()
    ledger.append(key_registration_envelope(other.public, [Role.ATTESTER], other, now=clock.now))
    out = io.StringIO()
    export_bundle(ledger, out)
    lines = out.getvalue().splitlines(keepends=True)
    # Closed, so no writing ledger's thread (WAL checkpoints) is left to make the pool tests
    # fork from a process with threads.
    other_process.close()
    ledger.close()
    revocation = next(
        n
        for n, line in enumerate(lines)
        if "Principal.Revoked" in line and json.loads(line)["type"] == "event"
    )
    return Bundle(lines, late.key_id, revocation)


# These tests are about parallel and sequential verification agreeing, not about anchoring.
UNPINNED = VerificationPolicy(trust_root=None, allow_unanchored=True)


def both(lines: list[str], *, workers_must_start: bool = True) -> Report:
    """Verify in this process and in worker processes; the counts must agree exactly.
    A mutation may end the bundle's event lines inside the first batch (an event line turned
    footer), so no worker starts: the two reports must still agree."""
    sequential = verify_bundle_lines(lines, UNPINNED, workers=1)
    with BundleVerifier(UNPINNED, workers=2, batch_events=16) as verifier:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                verifier.feed(number, line)
        parallel = verifier.finish()
        if workers_must_start:
            assert verifier._pool is not None, "the bundle should have been verified by workers"
    assert_same_report(parallel, sequential)
    return parallel


def assert_same_report(parallel: Report, sequential: Report) -> None:
    """Exactly one process's report: counts, facts, notes, and the findings in line order
    (past the cap, the same ones kept)."""
    assert parallel.passed == sequential.passed
    assert parallel.failed == sequential.failed
    assert parallel.findings == sequential.findings
    assert parallel.notes == sequential.notes
    assert parallel.facts == sequential.facts
    assert parallel.to_json() == sequential.to_json()


def events(lines: list[str]) -> list[tuple[int, dict[str, Any]]]:
    return [
        (n, record)
        for n, line in enumerate(lines)
        if (record := json.loads(line))["type"] == "event"
    ]


def with_event(lines: list[str], index: int, record: dict[str, Any]) -> list[str]:
    changed = list(lines)
    changed[index] = json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"
    return changed


def signer(record: dict[str, Any]) -> str:
    return str(record["envelope"]["signatures"][0]["keyid"])


def attestations_by(lines: list[str], key_id: str) -> list[tuple[int, dict[str, Any]]]:
    return [
        (n, r)
        for n, r in events(lines)
        if r["topic"].endswith("Run.Attested") and signer(r) == key_id
    ]


# ---------------------------------------------------------------------------------------


def test_clean_bundle_verifies_with_the_same_counts(bundle: Bundle) -> None:
    report = both(bundle.lines)
    assert report.verified, report.to_json()
    n = len(events(bundle.lines))
    assert n > 200
    assert report.passed["signature"] == report.passed["inclusion"] == report.passed["order"] == n
    assert report.passed["manifests"] == RUNS
    # Events signed by the late-revoked key before its revocation still hold.
    assert attestations_by(bundle.lines, bundle.late_key)


def test_small_bundle_stays_in_process(bundle: Bundle) -> None:
    head = [*bundle.lines[:40], json.dumps({"type": "footer", "events": 37}) + "\n"]
    with BundleVerifier(UNPINNED, workers=4) as verifier:
        for number, line in enumerate(head, start=1):
            verifier.feed(number, line)
        report = verifier.finish()
        assert verifier._pool is None
    # Cut short of its checkpoint's size, a whole-log bundle is incomplete (and says so).
    assert report.failed == Counter({"complete": 1})


# The batches this process verified itself, by their sizes (a forked worker appends to its own
# copy). Module level: the pool ships the function by name.
_HERE: list[int] = []


def _verified_here(batch: Batch) -> BatchResult:
    _HERE.append(len(batch.lines))
    return _verify_batch(batch)


def test_workers_start_once_the_bundle_shows_enough_events_which_wait_for_them(
    bundle: Bundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers start once the bundle has shown START_BATCHES batches' worth of event lines;
    until then its events are held, not verified, and then shipped to them. This process
    verifies only a stretch of events that ended before (too few to start workers for) and,
    forked, WARM_EVENTS events first (what verifying loads on first use, loaded once)."""
    # Forked, whatever other tests of this process left running (a writing ledger's WAL
    # checkpoint thread, say), so the workers see this test's ``verify_batch``.
    monkeypatch.setattr(_pool, "pool_context", lambda: multiprocessing.get_context("fork"))
    monkeypatch.setattr(_pool, "verify_batch", _verified_here)
    _HERE.clear()
    batch = 16
    start = _pool.START_BATCHES * batch
    plain = [is_key_event(r) for _, r in events(bundle.lines)]
    first_stretch = plain.index(True, plain.index(False))  # events before the keys among them
    first_stretch -= plain.index(False)
    assert 0 < first_stretch < start
    sequential = verify_bundle_lines(bundle.lines, UNPINNED, workers=1)
    _HERE.clear()
    shown = 0
    with BundleVerifier(UNPINNED, workers=2, batch_events=batch) as verifier:
        for number, line in enumerate(bundle.lines, start=1):
            verifier.feed(number, line)
            record = json.loads(line)
            shown += record["type"] == "event" and not is_key_event(record)
            if shown < start:
                assert verifier._pool is None, f"workers started at event {shown}"
            elif shown >= start + batch:  # by the close of the batch that reached it
                assert verifier._pool is not None, f"no workers at event {shown}"
        parallel = verifier.finish()
    assert [first_stretch, _pool.WARM_EVENTS] == _HERE
    assert_same_report(parallel, sequential)


def test_a_bundle_of_several_batches_but_few_events_stays_in_process(bundle: Bundle) -> None:
    """Fewer event lines than workers start for, in several batches: verified here, held
    batches and all, in order."""
    batch = 8
    plain = [n for n, r in events(bundle.lines) if not is_key_event(r)]
    lines = bundle.lines[: plain[_pool.START_BATCHES * batch - 1]]  # one event short
    lines.append(json.dumps({"type": "footer", "events": len(events(lines))}) + "\n")
    sequential = verify_bundle_lines(lines, UNPINNED, workers=1)
    with BundleVerifier(UNPINNED, workers=2, batch_events=batch) as verifier:
        for number, line in enumerate(lines, start=1):
            verifier.feed(number, line)
        parallel = verifier.finish()
        assert verifier._pool is None
    assert_same_report(parallel, sequential)
    assert parallel.failed == Counter({"complete": 1})  # a whole-log bundle, cut short


def test_held_batches_that_end_a_stretch_full_are_merged_before_the_next_line(
    bundle: Bundle,
) -> None:
    """A stretch of events that fills its last batch exactly, before workers start: the line
    after it (a key event, the footer) finds no open batch, and the held ones must still be
    verified and merged before it (else events come after the keys they precede, or are
    never counted)."""
    plain = [is_key_event(r) for _, r in events(bundle.lines)]
    first_stretch = plain.index(True, plain.index(False)) - plain.index(False)
    whole = events(bundle.lines)
    cut = [n for n, r in whole if not is_key_event(r)][first_stretch + 2 * first_stretch - 1]
    lines = [*bundle.lines[: cut + 1], json.dumps({"type": "footer", "events": 0}) + "\n"]
    for cases in (bundle.lines, lines):
        sequential = verify_bundle_lines(cases, UNPINNED, workers=1)
        parallel = verify_bundle_lines(cases, UNPINNED, workers=2, batch_events=first_stretch)
        assert_same_report(parallel, sequential)
        assert not sequential.failed["order"]


def test_workers_start_on_short_stretches_of_events_that_add_up(bundle: Bundle) -> None:
    """Other lines every few events (each closing the batch): no stretch holds enough events
    to start workers, all of them together do; the report is one process's."""
    lines = list(bundle.lines)
    for n, _ in reversed(events(lines)[20::25]):
        lines.insert(n, '{"type":"bogus"}\n')
    sequential = verify_bundle_lines(lines, UNPINNED, workers=1)
    with BundleVerifier(UNPINNED, workers=2, batch_events=16) as verifier:
        for number, line in enumerate(lines, start=1):
            verifier.feed(number, line)
        parallel = verifier.finish()
        assert verifier._pool is not None
    assert_same_report(parallel, sequential)
    assert parallel.failed["format"] == len(events(bundle.lines)[20::25])


def test_workers_start_from_a_fork_server_when_threads_run(bundle: Bundle) -> None:
    """With another thread alive (e.g. a progress bar), workers are not forked from here."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert _pool_context().get_start_method() in {"forkserver", "spawn"}
        sequential = verify_bundle_lines(bundle.lines, UNPINNED, workers=1)
        parallel = verify_bundle_lines(bundle.lines, UNPINNED, workers=2, batch_events=64)
    finally:
        stop.set()
        thread.join()
    assert parallel.verified and parallel.passed == sequential.passed


def test_flipped_signature_byte(bundle: Bundle) -> None:
    n, record = events(bundle.lines)[150]
    sig = bytearray(base64.b64decode(record["envelope"]["signatures"][0]["sig"]))
    sig[7] ^= 0x01
    record["envelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    report = both(with_event(bundle.lines, n, record))
    assert report.failed == Counter({"signature": 1, "inclusion": 1})


def test_bad_proof_hash(bundle: Bundle) -> None:
    n, record = events(bundle.lines)[100]
    proof = record["proof"]
    proof[len(proof) // 2] = base64.b64encode(bytes(32)).decode()
    report = both(with_event(bundle.lines, n, record))
    assert report.failed == Counter({"inclusion": 1})


def test_event_used_after_its_key_was_revoked(bundle: Bundle) -> None:
    """Move one of the late key's attestations after its revocation in the bundle: its log
    position (which its leaf commits to) still comes before the revocation's, so its key was
    valid there; the move itself is what fails, as a leaf out of order."""
    n, _ = attestations_by(bundle.lines, bundle.late_key)[-1]
    lines = list(bundle.lines)
    moved = lines.pop(n)
    lines.insert(bundle.late_revocation, moved)  # the revocation shifted up by one
    report = both(lines)
    assert report.failed == Counter({"order": 1})


def test_line_order_never_changes_a_keys_validity(bundle: Bundle) -> None:
    """Validity is by log position, not by the order lines arrive or by clocks: with the late
    key's revocation moved before its attestations (and received "before" them, by a clock
    that went back), every attestation still holds; only the moved line's order fails."""
    lines = list(bundle.lines)
    revocation = lines.pop(bundle.late_revocation)
    first = attestations_by(lines, bundle.late_key)[0][0]
    lines.insert(first, revocation)
    report = both(lines)
    assert len(attestations_by(lines, bundle.late_key)) > 10
    assert report.failed["key-valid"] == 0
    assert report.failed["order"] >= 1


def test_received_after_revocation(bundle: Bundle) -> None:
    """An event of the late key, redated past the revocation's time but kept in place, was
    received before the revocation in leaf order: only its leaf no longer matches."""
    n, record = attestations_by(bundle.lines, bundle.late_key)[0]
    record["receivedAt"] = format_time(utc_now())
    report = both(with_event(bundle.lines, n, record))
    assert report.failed == Counter({"inclusion": 1})


def test_missing_key_registration(bundle: Bundle) -> None:
    """Drop an attester's registration: every event it signed names an unknown key."""
    key = next(signer(r) for _, r in events(bundle.lines) if r["topic"].endswith("Run.Attested"))
    n = next(
        n
        for n, r in events(bundle.lines)
        if r["topic"].endswith("Principal.Registered")
        and json.loads(base64.b64decode(r["envelope"]["payload"]))["predicate"]["keyId"] == key
    )
    lines = bundle.lines[:n] + bundle.lines[n + 1 :]
    report = both(lines)
    signed = len(attestations_by(lines, key))
    assert signed > 10
    # complete: a leaf short, and the key's registration (its version 1) not in the bundle.
    assert report.failed == Counter({"signature": signed, "format": 1, "complete": 2})


def test_several_faults_and_junk_lines(bundle: Bundle) -> None:
    lines = list(bundle.lines)
    rng = random.Random(7)
    for n, record in rng.sample(events(lines)[10:], 12):
        record["version"] += 1
        lines[n] = json.dumps(record) + "\n"
    lines.insert(120, "not json\n")
    lines.insert(60, json.dumps({"type": "event", "leafIndex": "x"}) + "\n")
    report = both(lines)
    assert report.failed["inclusion"] == 12 and report.failed["format"] >= 3


def test_an_event_line_no_reader_accepts_is_refused_alike(bundle: Bundle) -> None:
    """With workers, the verifying process routes an event line by its type and topic alone;
    a line that reads so but not whole (a number beyond a float's range, in a field the
    routing skips) is refused by the worker as this process refuses it, and is no event:
    the footer's count still disagrees, as it does in one process (near the end: the
    footer is checked once the batches still out are merged)."""
    lines = list(bundle.lines)
    n, record = events(lines)[-8]
    line = json.dumps(record, separators=(",", ":"))
    lines[n] = line[:-1] + ',"pad":1e999}\n'  # the event, unreadable
    lines.insert(n + 5, '{"type":"event","topic":"ledger.aggregates:Run.Attested","x":-1e400}\n')
    report = both(lines)
    assert report.facts["events"] == len(events(bundle.lines)) - 1
    refused = {(f.where, f.reason) for f in report.findings if f.check == "format"}
    footer = f"line {len(lines)}"
    assert refused == {
        (f"line {n + 1}", "not a JSON object"),
        (f"line {n + 6}", "not a JSON object"),
        (
            footer,
            f"footer says {len(events(bundle.lines))} events, the bundle has "
            f"{len(events(bundle.lines)) - 1}",
        ),
    }


def test_the_run_tracker_folds_the_same_events_in_leaf_order(bundle: Bundle) -> None:
    """What the runs are recomputed from is the same whether workers verify the events or
    this process does: the same folds, the same verdict on a wrong claim."""
    lines = list(bundle.lines)
    n, record = events(lines)[170]  # one fault: that event is not folded
    record["receivedAt"] = format_time(utc_now())
    lines[n] = json.dumps(record) + "\n"
    first = next(r for _, r in events(lines) if r["topic"].endswith("Run.Ingested"))
    statement = json.loads(base64.b64decode(first["envelope"]["payload"]))
    run = "sha256:" + statement["subject"][0]["digest"]["sha256"]
    claim = {
        "type": "claim",
        "run": run,
        "comparisonKey": None,
        "evidence": {"level": "verified", "policyVersion": "evidence-v2"},
        "standings": {},
    }
    lines.insert(3, json.dumps(claim) + "\n")  # after the checkpoint, before the events
    folds = []
    for workers, batch in ((1, 256), (2, 16)):
        with BundleVerifier(UNPINNED, workers=workers, batch_events=batch) as verifier:
            for number, line in enumerate(lines, start=1):
                verifier.feed(number, line)
            report = verifier.finish()
            folds.append(
                {
                    d: (f.attestations, f.evidence.level, f.profile.comparison_key)
                    for d, f in verifier.runs.runs.items()
                }
            )
        assert report.failed["inclusion"] == 1
        assert any("claims evidence level 'verified'" in f.reason for f in report.findings)
    assert folds[0] == folds[1]
    assert len(folds[0]) >= RUNS - 1  # the faulty event may be an ingestion


# ---------------------------------------------------------------------------------------
# The shortcuts are exact


def test_a_proof_read_from_the_memo_is_read_as_a_first_read_reads_it() -> None:
    """``decode_proof`` answers a proof whose hashes it has seen (the memo's one C loop) as
    it answers the first time: the same hashes, or the same refusal, whatever the items."""
    from ledger.verify.events import decode_proof

    good = [base64.b64encode(bytes([i]) * 32).decode() for i in range(3)]
    cases: list[object] = [
        good,
        [],
        [*good, ""],  # an empty hash: b"", refused later by its length
        [*good, 5],
        [*good, None],
        [*good, []],
        [*good, {"a": 1}],
        [*good, "not base64!"],
        [*good, good[0].replace("=", "")],
        "not a list",
    ]

    def read(value: object) -> str:
        try:
            return repr(decode_proof(value))
        except (ValueError, TypeError) as exc:
            return f"{type(exc).__name__}: {exc}"

    first = [read(value) for value in cases]
    assert [read(value) for value in cases] == first  # every valid spelling now remembered
    assert first[0] == repr([bytes([i]) * 32 for i in range(3)])
    assert first[2].endswith(", b'']")
    refusals = ("proof hash must be a base64 string", "proof hash is not valid standard base64")
    assert all(answer.endswith(refusals) for answer in first[3:-1]), first
    assert first[-1] == "ValueError: proof must be a list"


def test_cached_inclusion_decides_exactly_as_verify_inclusion() -> None:
    rng = random.Random(1)
    for size in (1, 2, 3, 7, 8, 9, 33, 100):
        hashes = [leaf_hash(bytes([i % 256, i // 256])) for i in range(size)]
        tree_root = root(hashes)
        checker = _InclusionChecker()
        for index in range(size):
            proof = inclusion_proof(index, hashes)
            cases: list[tuple[bytes, int, list[bytes]]] = [(hashes[index], index, proof)]
            if proof:
                bad = list(proof)
                k = rng.randrange(len(bad))
                bad[k] = bytes(32)
                # A hash of the wrong length anywhere: the checker looks at each one it uses.
                short = list(proof)
                short[rng.randrange(len(short))] = proof[0][:31]
                cases += [
                    (hashes[index], index, bad),
                    (hashes[index], index, short),
                    (hashes[index], index, proof[:-1]),
                ]
            cases += [(hashes[(index + 1) % size], index, proof), (hashes[index], size, proof)]
            for leaf, i, p in cases:
                outcomes = []
                for verify in (verify_inclusion, checker.verify):
                    try:
                        verify(leaf, i, size, p, tree_root)
                        outcomes.append("ok")
                    except ProofError as exc:
                        outcomes.append(f"{type(exc).__name__}: {exc}")
                assert outcomes[0] == outcomes[1], (size, index, outcomes)


# --- attack review of h/vthru (routing by a partial read) -----------------------------------


def test_routed_unreadable_lines_keep_the_same_findings_past_the_cap(bundle: Bundle) -> None:
    """Attack (h/vthru): more unreadable event lines than a report keeps findings for, then a
    line this process refuses itself. In one process the junk lines' refusals come first and
    fill the report; routed to workers, they are merged after the later line's own finding
    was recorded here, so the report keeps another set of findings than one process does."""
    from ledger.verification_report import MAX_FINDINGS

    lines = list(bundle.lines)
    n, _ = events(lines)[-8]
    junk = '{"type":"event","topic":"ledger.aggregates:Run.Attested","x":-1e400}\n'
    lines[n:n] = [junk] * MAX_FINDINGS + ['{"type":"bogus"}\n']
    report = both(lines)
    assert report.failed["format"] >= MAX_FINDINGS + 1


def test_lines_the_partial_read_may_read_otherwise_are_verified_alike(bundle: Bundle) -> None:
    """Attack (h/vthru): event lines spelled so a partial read could name another type, topic
    or key than the whole read (repeated keys either way round, escaped key names, odd
    whitespace, numbers no double holds, a key event made unreadable) verify in workers as
    in one process: the same counts, findings and facts."""
    lines = list(bundle.lines)
    found = events(lines)
    keyed = [(n, r) for n, r in found if is_key_event(r) and n > found[0][0]]
    plain = [(n, r) for n, r in found if not is_key_event(r)]

    def text(record: dict[str, Any]) -> str:
        return json.dumps(record, separators=(",", ":"))[1:-1]

    n, r = plain[-20]  # a key topic first, the event's own last: an event for both reads
    lines[n] = '{"topic":"ledger.aggregates:Principal.Registered",' + text(r) + "}\n"
    n, r = plain[-30]  # its own topic first, a key event's last: read whole here by both
    lines[n] = "{" + text(r) + ',"topic":"ledger.aggregates:Principal.Registered"}\n'
    n, r = plain[-40]  # escaped key names and whitespace around every token
    body = text(r).replace('"type":', ' "\\u0074ype" :\t').replace('"topic":', '\r"t\\u006fpic":')
    lines[n] = "{" + body + " }\r\n"
    n, r = plain[-50]  # numbers beyond int64 and a negative zero in fields routing skips
    lines[n] = "{" + text(r) + ',"pad":[123456789012345678901234567890,-0.0,1e-999]}\n'
    n, r = plain[-60]  # a second type after the first: not an event line for either read
    lines[n] = "{" + text(r) + ',"type":"artifact"}\n'
    n, r = plain[-70]  # a byte that is no UTF-8, kept by open_bundle as a lone surrogate
    lines[n] = "{" + text(r) + ',"pad":"\udcff"}\n'
    n, r = plain[-80]  # a raw NUL in a string that routing skips
    lines[n] = "{" + text(r) + ',"pad":"\x00"}\n'
    n, r = keyed[-1]  # a key event no whole read accepts
    lines[n] = "{" + text(r) + ',"pad":1e999}\n'
    both(lines)


def test_worker_findings_past_the_cap_are_the_ones_one_process_keeps(bundle: Bundle) -> None:
    """Attack (h/vthru), found before it: the same class as the routed unreadable lines, for
    findings a worker makes (a bad signature, many times over). Past the cap, the findings
    kept depend on when the workers' results were merged, not on the lines' order."""
    from ledger.verification_report import MAX_FINDINGS

    n, record = events(bundle.lines)[150]
    sig = bytearray(base64.b64decode(record["envelope"]["signatures"][0]["sig"]))
    sig[7] ^= 0x01
    record["envelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    bad = json.dumps(record, separators=(",", ":")) + "\n"
    lines = list(bundle.lines)
    lines[n : n + 1] = [bad] * (MAX_FINDINGS // 2 + 1) + ['{"type":"bogus"}\n']
    report = both(lines)
    assert report.failed["signature"] == MAX_FINDINGS // 2 + 1


_TOKENS = [
    "1e999",
    "-1e400",
    "1e-999",
    "-0.0",
    "123456789012345678901234567890",
    '"\\ud800"',
    '"\\u0000"',
    "NaN",
    "[1,]",
    '"\\udcff"',
    '{"a":1,"a":2}',
    '"\x00"',
    '"\udcff"',
]
_TOPICS = [
    "ledger.aggregates:Run.Attested",
    "ledger.aggregates:Principal.Registered",
    "ledger.aggregates:Principal.Revoked",
    "ledger.aggregates:Run.Ingested",
    "Run.Attested",
    7,
]
_TYPES = ["event", "artifact", "claim", "footer", "headsLeaf", None, "bogus"]


@st.composite
def _mutated(draw: st.DrawFn, lines: list[str]) -> list[str]:
    changed = list(lines)
    found = events(lines)[3:]
    for _ in range(draw(st.integers(1, 4))):
        n, record = draw(st.sampled_from(found))
        body = json.dumps(record, separators=(",", ":"))[1:-1]
        how = draw(st.integers(0, 6))
        if how == 0:
            body += f',"pad":{draw(st.sampled_from(_TOKENS))}'
        elif how == 1:
            body = f'"topic":{json.dumps(draw(st.sampled_from(_TOPICS)))},' + body
        elif how == 2:
            body += f',"topic":{json.dumps(draw(st.sampled_from(_TOPICS)))}'
        elif how == 3:
            body += f',"type":{json.dumps(draw(st.sampled_from(_TYPES)))}'
        elif how == 4:
            body = body.replace('"type":', '"\\u0074ype":').replace('"topic":', '"t\\u006fpic":')
        elif how == 5:
            other = draw(st.sampled_from(found))[1]
            body += f',"envelope":{json.dumps(other["envelope"], separators=(",", ":"))}'
        else:
            body = body[: draw(st.integers(0, len(body)))]
        changed[n] = "{" + body + "}\n"
    return changed


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_event_lines_verify_alike_in_workers(bundle: Bundle, data: st.DataObject) -> None:
    """Attack (h/vthru): event lines mutated where a partial read and a whole read could part
    (repeated type, topic or envelope either way round, escaped keys, tokens only a skipping
    reader takes, bytes that are no UTF-8, truncation): one process and workers agree."""
    both(data.draw(_mutated(bundle.lines)), workers_must_start=False)


def _past_cap(bundle: Bundle) -> list[str]:
    """The bundle with one event's signature broken, that line repeated past the cap (made once)."""
    if not _PAST_CAP_LINES:
        n, record = events(bundle.lines)[100]
        record["envelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(64)).decode()
        bad = json.dumps(record, separators=(",", ":")) + "\n"
        _PAST_CAP_LINES.extend([*bundle.lines[:n], *[bad] * 1001, *bundle.lines[n + 1 :]])
    return _PAST_CAP_LINES


_PAST_CAP_LINES: list[str] = []


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), workers=st.integers(2, 3), batch=st.integers(1, 40))
def test_n_workers_give_one_process_report_on_tampered_bundles(
    bundle: Bundle, data: st.DataObject, workers: int, batch: int
) -> None:
    """Whatever the workers and the batch size (so whenever workers start, and however the
    events are split), a tampered bundle's report is exactly one process's: findings in the
    same order, notes, counts and facts."""
    lines = _past_cap(bundle) if data.draw(st.booleans()) else bundle.lines
    lines = data.draw(_mutated(lines))
    sequential = verify_bundle_lines(lines, UNPINNED, workers=1)
    parallel = verify_bundle_lines(lines, UNPINNED, workers=workers, batch_events=batch)
    assert_same_report(parallel, sequential)


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"claim","run":"x"}',  # another kind of line
        '{"type":"event","topic":"ledger.aggregates:Principal.Registered","envelope":{}}',
        "[1]",  # no object at all
    ],
    ids=["claim", "key event", "array"],
)
def test_a_worker_refuses_a_line_that_is_no_plain_event_whatever_routed_it(line: str) -> None:
    """(Review, LOW.) A worker reads each routed line whole and verifies it only as what one
    process would batch: an event that is no key event. Whatever routed another line there
    (the two reads are held to agree by property tests), it is refused and counted as no
    event, never verified as what it is not."""
    from ledger.verify.batches import ROUTED_OTHERWISE, Batch, verify_batch
    from ledger.verify.events import EventContext

    out = verify_batch(Batch(EventContext(None, None), [(7, line)]))
    assert out.unreadable == 1
    assert [(f.where, f.reason) for f in out.report.findings] == [("line 7", ROUTED_OTHERWISE)]
    assert not out.seen


def test_workers_forked_from_here_report_what_one_process_reports(
    bundle: Bundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no other thread alive the workers are forked from here (``ForkedWorkers``: pipes,
    no process pool), clean and tampered bundles alike give one process's report."""
    monkeypatch.setattr(_pool, "_may_fork", lambda: True)
    n, record = events(bundle.lines)[150]
    sig = bytearray(base64.b64decode(record["envelope"]["signatures"][0]["sig"]))
    sig[7] ^= 0x01
    record["envelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    for lines in (bundle.lines, with_event(bundle.lines, n, record)):
        sequential = verify_bundle_lines(lines, UNPINNED, workers=1)
        with BundleVerifier(UNPINNED, workers=2, batch_events=16) as verifier:
            for number, line in enumerate(lines, start=1):
                verifier.feed(number, line)
            parallel = verifier.finish()
            assert isinstance(verifier._pool, _pool.ForkedWorkers)
        assert_same_report(parallel, sequential)
    assert parallel.failed == Counter({"signature": 1, "inclusion": 1})
