"""What verify and audit found: counts of what held, and every failure with where and why."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# Bound the findings kept so a badly damaged million-event bundle cannot exhaust memory;
# the counters keep the totals.
MAX_FINDINGS = 1000


@dataclass(frozen=True)
class Finding:
    check: str
    where: str
    reason: str


@dataclass
class Report:
    subject: str
    passed: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def ok(self, check: str, count: int = 1) -> None:
        self.passed[check] += count

    def fail(self, check: str, where: str, reason: str) -> None:
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
