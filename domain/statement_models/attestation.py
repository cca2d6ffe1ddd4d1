"""An attester's predicate: a reproduction, a note, or an issue report about a run."""

# No ``from __future__ import annotations``: msgspec reads these Structs' annotations as
# objects, not strings it would compile and evaluate when each is first used (issue 33).

from typing import Annotated

from msgspec import Meta

from domain.statement_models.common import (
    HttpsUrl,
    SignedPredicate,
    Uint53,
    https_url,
    visible,
)
from domain.statements import AttestationType, ReportReason


class AttestationPredicate(SignedPredicate, kw_only=True, frozen=True):
    type: AttestationType
    body: Annotated[str, Meta(min_length=1, max_length=2000)]
    observedNs: Uint53 | None = None
    environmentSummary: Annotated[str, Meta(max_length=500)] | None = None
    evidenceUrl: HttpsUrl | None = None
    reason: ReportReason | None = None

    _field_checks = (
        *SignedPredicate._field_checks,
        ("body", visible),
        ("environmentSummary", visible),
        ("evidenceUrl", https_url),
    )

    def validate(self) -> None:
        if (self.reason is not None) != (self.type is AttestationType.ISSUE_REPORT):
            raise ValueError("an issue_report names its reason, and only an issue_report does")
