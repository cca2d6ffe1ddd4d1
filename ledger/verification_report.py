"""What verify and audit found: counts of what held, and every failure with where and why.

:class:`Check` names every check, once: ``verify --help``, the README and the reports use
these names, and a check that is not in the enum cannot be reported.
"""

from __future__ import annotations

import collections
from collections import Counter
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any

import msgspec


class Check(StrEnum):
    """Every named check of ``history``, ``audit`` and ``verify``, with what it means."""

    # --- the bundle, its anchor and its freshness (verify)
    FORMAT = "format"  # header, line types and order, footer count
    ANCHOR = "anchor"  # the caller pinned a trust root (else UNANCHORED)
    TRUST_ROOT = "trust-root"  # the bundle's trust root is the pinned one
    CHECKPOINT = "checkpoint"  # signed by the log key; agrees with checkpoints the caller holds
    CONSISTENCY = "consistency"  # the checkpoint extends the older ones the caller holds
    FRESHNESS = "freshness"  # the bundle reaches every checkpoint the caller holds (else STALE)
    WITNESSED = "witnessed"  # the checkpoint (or a later one it extends) meets the witness quorum
    INCLUSION = "inclusion"  # each event's leaf is in the checkpoint's tree
    ORDER = "order"  # leaf indices strictly increase
    # --- each event (history, audit, verify)
    RECORD = "record-readable"  # the stored or bundled record decodes
    ENVELOPE = "envelope"  # DSSE envelope: shape, one signature, canonical base64, statement
    PREDICATE = "predicate"  # the predicate's schema
    EVENT_TYPE = "event-type"  # the event class carries the predicate type it must
    SUBJECT = "subject"  # filed under the aggregate its subject names
    KEY_STATEMENT = "key-statement"  # a key statement's form: subject, roles, validity window
    SIGNATURE = "signature"  # its one signature verifies under the key it names
    KEY_VALID = "key-valid"  # that key was registered, unrevoked, unexpired at that point
    ROLE = "role"  # that key's role may sign that predicate type
    MANIFESTS = "manifests"  # an ingestion's manifests digest to its subject
    TIMELY = "timely"  # a statement that acts on receipt (a claim) was not stale then
    VERSIONS = "versions"  # each aggregate's versions run 1, 2, 3... with no gap
    # --- completeness (verify)
    HEADS = "heads"  # the log key's signed heads for the bundle's checkpoint
    # the heads are those the checkpoint's heads leaf commits to; each heads leaf of a whole
    # log is the map of the events before it
    HEADS_MAP = "heads-map"
    COMPLETE = "complete"  # every event of each run and key in scope, as the heads say
    GROUP = "group"  # every member of each claimed comparison group, as the heads say
    # --- claims and the caller's expectations (verify)
    CLAIM = "claim"  # each claimed level and rank, recomputed from the (complete) events
    EXPECTATION = "expectation"  # what the caller asked for (--run, --min-level, --rank)
    ARTIFACT = "artifact"  # a bundled artifact hashes to its digest
    # --- the stored log (audit)
    SEQUENCED = "sequenced"  # every event has exactly one leaf, densely
    LEAF = "leaf"  # each leaf hash recomputed from its event
    TREE = "tree"  # stored subtree hashes recomputed from the leaves
    FOLD_FIELDS = "fold-fields"  # each event's fold fields row is the one its event makes


# The C loop ``Counter.update`` counts an iterable with (CPython's ``collections``; not in
# its stubs, hence looked up by name).
_count_elements: Callable[[Counter[str], Iterable[str]], None] = vars(collections)[
    "_count_elements"
]

# Bound the findings kept so a badly damaged million-event bundle cannot exhaust memory;
# the counters keep the totals.
MAX_FINDINGS = 1000


class Finding(msgspec.Struct, frozen=True):
    check: str
    where: str
    reason: str


class Report(msgspec.Struct):
    subject: str
    passed: Counter[str] = msgspec.field(default_factory=Counter)
    failed: Counter[str] = msgspec.field(default_factory=Counter)
    findings: list[Finding] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    facts: dict[str, Any] = msgspec.field(default_factory=dict)

    def ok(self, check: Check, count: int = 1) -> None:
        # Every check of every event passes through here: no Check() lookup for a Check.
        self.passed[check if type(check) is Check else Check(check)] += count

    def ok_each(self, checks: list[Check]) -> None:
        """``ok`` of each of ``checks`` (each a ``Check``: an unknown name is a bug).

        ``Counter.update`` of a list is this same C counting loop behind a Mapping test
        (an ABC check) and Python frames, ~1 µs of ~2 for every event of a bundle."""
        _count_elements(self.passed, checks)

    def fail(self, check: Check, where: str, reason: str) -> None:
        check = Check(check)  # an unknown name is a bug: it raises here
        self.failed[check] += 1
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(Finding(check, where, reason))

    @property
    def verified(self) -> bool:
        return not self.failed and sum(self.passed.values()) > 0

    def to_json(self) -> dict[str, Any]:
        checks = sorted(set(self.passed) | set(self.failed))
        return {
            "subject": self.subject,
            "verified": self.verified,
            "checks": {c: {"passed": self.passed[c], "failed": self.failed[c]} for c in checks},
            "findings": [
                {"check": f.check, "where": f.where, "reason": f.reason} for f in self.findings
            ],
            "findingsTruncated": sum(self.failed.values()) > len(self.findings),
            "notes": self.notes,
            "facts": self.facts,
        }
