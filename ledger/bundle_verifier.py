"""Offline verification of a bundle: no network, no database, one pass, flat memory.

Checks, each named in the report:

- ``format``          header, line types and order, footer count (truncation);
- ``trust-root``      the bundle's trust root is the one the verifier pins (if it pins one);
- ``checkpoint``      the checkpoint is signed by the trust root's log key for its origin,
                      and agrees with any other checkpoint the verifier holds (no fork);
- ``inclusion``       every event's leaf, recomputed from its contents, is in the checkpoint's
                      tree at its leaf index;
- ``signature``, ``key-valid``, ``role``, ``subject``, ``event-type``, ``envelope``,
  ``manifests``       each event re-verified exactly as ``history`` does, against keys whose
                      registration events chain to the trust root (keys are learned in leaf
                      order, so a key must be registered before it signs);
- ``order``           leaf indices strictly increase;
- ``claim``           every claimed state is recomputed from the events (when claims exist).

Memory holds the key registry and per-run facts, never the events.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

from domain.errors import DomainError
from domain.statements import PredicateType, Role
from domain.timestamps import parse_time
from ledger.bundle import BUNDLE_FORMAT
from ledger.event_verification import EventVerification, verify_event
from ledger.key_registry import KeyRecord
from ledger.keys import PublicKey
from ledger.log_entries import LogEntry
from ledger.merkle import ProofError, verify_consistency, verify_inclusion
from ledger.signed_note import Checkpoint, NoteError, Verifier, open_checkpoint
from ledger.trust import TrustRoot, TrustRootError
from ledger.verification_report import Report

ClaimChecker = Callable[[dict[str, Any], Report], None]


class _KeyBook:
    """Keys learned from verified Principal events, in leaf order."""

    def __init__(self) -> None:
        self.records: dict[str, KeyRecord] = {}

    def __call__(self, key_id: str) -> KeyRecord | None:
        return self.records.get(key_id)

    def learn(self, result: EventVerification) -> None:
        p = result.predicate or {}
        key_id = str(p.get("keyId"))
        if result.event == "Principal.Registered" and key_id not in self.records:
            self.records[key_id] = KeyRecord(
                key_id=key_id,
                public_key=PublicKey.from_b64(str(p["publicKey"])),
                roles=frozenset(Role(r) for r in p.get("roles") or []),
                valid_from=parse_time(str(p["validFrom"])),
                valid_until=parse_time(str(p["validUntil"])) if p.get("validUntil") else None,
                registered_at=parse_time(str(result.received_at)),
                revoked_at=None,
                label=p.get("label"),
            )
        elif result.event == "Principal.Revoked" and key_id in self.records:
            old = self.records[key_id]
            self.records[key_id] = KeyRecord(
                key_id=old.key_id,
                public_key=old.public_key,
                roles=old.roles,
                valid_from=old.valid_from,
                valid_until=old.valid_until,
                registered_at=old.registered_at,
                revoked_at=parse_time(str(result.received_at)),
                label=old.label,
            )


def _decode_proof(value: object) -> list[bytes]:
    if not isinstance(value, list):
        raise ValueError("proof must be a list")
    return [base64.b64decode(str(h), validate=True) for h in value]


class BundleVerifier:
    def __init__(
        self,
        *,
        pinned_root: TrustRoot | None = None,
        known_checkpoints: Iterable[str] = (),
        claim_checker: ClaimChecker | None = None,
    ) -> None:
        self.pinned_root = pinned_root
        self.known_checkpoints = list(known_checkpoints)
        self.claim_checker = claim_checker
        self.report = Report(subject="bundle")
        self.trust_root: TrustRoot | None = pinned_root
        self.checkpoint: Checkpoint | None = None
        self.keys = _KeyBook()
        self.last_leaf = -1
        self.events = 0
        self.footer_seen = False
        self.header_seen = False

    # ----------------------------------------------------------------- lines

    def feed(self, number: int, line: str) -> None:
        where = f"line {number}"
        if self.footer_seen:
            self.report.fail("format", where, "content after the footer")
            return
        try:
            record = json.loads(line)
        except ValueError:
            self.report.fail("format", where, "not a JSON object")
            return
        kind = record.get("type") if isinstance(record, dict) else None
        handler = {
            "header": self._header,
            "trustRoot": self._trust_root,
            "checkpoint": self._checkpoint,
            "event": self._event,
            "claim": self._claim,
            "footer": self._footer,
        }.get(str(kind))
        if handler is None:
            self.report.fail("format", where, f"unknown line type {kind!r}")
            return
        if kind != "header" and not self.header_seen:
            self.report.fail("format", where, "bundle does not start with a header")
        handler(where, record)

    def finish(self) -> Report:
        if not self.footer_seen:
            self.report.fail("format", "end", "no footer: the bundle is truncated")
        if self.checkpoint is None:
            self.report.fail("checkpoint", "end", "the bundle has no checkpoint")
        self.report.facts.update(
            {"events": self.events, "keys": len(self.keys.records)}
            | ({"treeSize": self.checkpoint.size} if self.checkpoint else {})
        )
        return self.report

    # --------------------------------------------------------------- handlers

    def _header(self, where: str, record: dict[str, Any]) -> None:
        if self.header_seen:
            self.report.fail("format", where, "second header")
            return
        self.header_seen = True
        if record.get("format") != BUNDLE_FORMAT:
            self.report.fail(
                "format", where, f"format is {record.get('format')!r}, not {BUNDLE_FORMAT}"
            )
        else:
            self.report.ok("format")
        self.report.facts["scope"] = record.get("scope")

    def _trust_root(self, where: str, record: dict[str, Any]) -> None:
        try:
            bundled = TrustRoot.from_json(record.get("trustRoot"))
        except TrustRootError as exc:
            self.report.fail("trust-root", where, exc.message)
            return
        if self.pinned_root is None:
            self.trust_root = bundled
            self.report.notes.append(
                "trusting the trust root inside the bundle; pass --trust-root to pin your own"
            )
            self.report.ok("trust-root")
        elif bundled.to_json() != self.pinned_root.to_json():
            self.report.fail(
                "trust-root", where, "the bundle's trust root is not the one you pinned"
            )
        else:
            self.report.ok("trust-root")

    def _checkpoint(self, where: str, record: dict[str, Any]) -> None:
        if self.trust_root is None:
            self.report.fail("checkpoint", where, "no trust root to check the checkpoint against")
            return
        if self.checkpoint is not None:
            self.report.fail("format", where, "second checkpoint")
            return
        root = self.trust_root
        verifier = Verifier.from_public_key(root.origin, root.log_key.raw)
        try:
            checkpoint, _ = open_checkpoint(
                str(record.get("note", "")), [verifier], origin=root.origin
            )
        except NoteError as exc:
            self.report.fail("checkpoint", where, f"checkpoint does not verify: {exc}")
            return
        self.checkpoint = checkpoint
        self.report.ok("checkpoint")
        for other_note in self.known_checkpoints:
            self._compare_checkpoint(other_note, verifier)

    def _compare_checkpoint(self, note: str, verifier: Verifier) -> None:
        """A checkpoint the verifier already holds must be consistent with the bundle's."""
        assert self.checkpoint is not None
        try:
            other, _ = open_checkpoint(note, [verifier], origin=self.checkpoint.origin)
        except NoteError as exc:
            self.report.fail("checkpoint", "given checkpoint", f"does not verify: {exc}")
            return
        if other.size == self.checkpoint.size and other.root != self.checkpoint.root:
            self.report.fail(
                "checkpoint",
                "given checkpoint",
                f"two different roots signed for tree size {other.size}: the log equivocated",
            )
        elif other.size != self.checkpoint.size:
            self.report.notes.append(
                f"held checkpoint is for size {other.size}, the bundle's for "
                f"{self.checkpoint.size}: ask the ledger for a consistency proof "
                "(kernelindex log consistency)"
            )
        else:
            self.report.ok("checkpoint")

    def _event(self, where: str, record: dict[str, Any]) -> None:
        self.events += 1
        try:
            leaf_index = int(record["leafIndex"])
            entry = LogEntry(
                position=int(record["position"]),
                aggregate=str(record["aggregate"]),
                version=int(record["version"]),
                topic=str(record["topic"]),
                envelope=record["envelope"],
                received_at=str(record["receivedAt"]),
            )
            proof = _decode_proof(record.get("proof"))
            aggregate = UUID(entry.aggregate)
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            self.report.fail("format", where, f"malformed event line: {exc}")
            return
        where = f"leaf {leaf_index} (position {entry.position})"
        if leaf_index <= self.last_leaf:
            self.report.fail("order", where, f"leaf index does not increase after {self.last_leaf}")
        else:
            self.report.ok("order")
        self.last_leaf = max(self.last_leaf, leaf_index)
        self._check_inclusion(where, entry, leaf_index, proof)
        if self.trust_root is None:
            return
        result = verify_event(
            position=entry.position,
            version=entry.version,
            event=entry.topic.rsplit(":", 1)[-1],
            aggregate_id=aggregate,
            envelope_json=entry.envelope,
            received_at=entry.received_at,
            keys=self.keys,
            trust_root=self.trust_root,
        )
        for check in result.checks:
            if check.ok:
                self.report.ok(check.name)
            else:
                self.report.fail(check.name, where, check.detail)
        if result.ok and result.predicate_type == PredicateType.KEY:
            try:
                self.keys.learn(result)
            except (KeyError, ValueError, DomainError) as exc:
                self.report.fail("key-valid", where, f"key event cannot be read: {exc}")

    def _check_inclusion(
        self, where: str, entry: LogEntry, leaf_index: int, proof: list[bytes]
    ) -> None:
        if self.checkpoint is None:
            self.report.fail(
                "inclusion", where, "no verified checkpoint to prove inclusion against"
            )
            return
        try:
            leaf = entry.leaf_hash()
            verify_inclusion(leaf, leaf_index, self.checkpoint.size, proof, self.checkpoint.root)
        except (ProofError, DomainError) as exc:
            self.report.fail("inclusion", where, f"not in the checkpoint's tree: {exc}")
            return
        self.report.ok("inclusion")

    def _claim(self, where: str, record: dict[str, Any]) -> None:
        if self.claim_checker is None:
            self.report.fail(
                "claim", where, "the bundle makes a claim this verifier cannot recompute"
            )
            return
        self.claim_checker(record, self.report)

    def _footer(self, where: str, record: dict[str, Any]) -> None:
        self.footer_seen = True
        if record.get("events") != self.events:
            self.report.fail(
                "format",
                where,
                f"footer says {record.get('events')} events, the bundle has {self.events}",
            )
        else:
            self.report.ok("format")


def verify_bundle_lines(
    lines: Iterable[str],
    *,
    pinned_root: TrustRoot | None = None,
    known_checkpoints: Iterable[str] = (),
    claim_checker: ClaimChecker | None = None,
    progress: Callable[[int], None] | None = None,
) -> Report:
    verifier = BundleVerifier(
        pinned_root=pinned_root, known_checkpoints=known_checkpoints, claim_checker=claim_checker
    )
    for number, line in enumerate(lines, start=1):
        if line.strip():
            verifier.feed(number, line)
        if progress is not None:
            progress(number)
    return verifier.finish()


def check_consistency(old_note: str, new_note: str, proof: list[bytes], root: TrustRoot) -> None:
    """Both checkpoints verify under the log key and the newer extends the older."""
    verifier = Verifier.from_public_key(root.origin, root.log_key.raw)
    old, _ = open_checkpoint(old_note, [verifier], origin=root.origin)
    new, _ = open_checkpoint(new_note, [verifier], origin=root.origin)
    verify_consistency(old.size, new.size, proof, old.root, new.root)
