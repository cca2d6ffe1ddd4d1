"""An attester's predicate: a reproduction, a note, or an issue report about a run."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictInt, StrictStr, model_validator

from domain.statement_models.common import VISIBLE, HttpsUrl, SignedPredicate
from domain.statements import AttestationType, ReportReason


class AttestationPredicate(SignedPredicate):
    type: Annotated[AttestationType, Field(strict=False)]
    body: Annotated[StrictStr, Field(min_length=1, max_length=2000), VISIBLE]
    observedNs: Annotated[StrictInt, Field(ge=0, le=2**53 - 1)] | None = None
    environmentSummary: Annotated[StrictStr, Field(max_length=500), VISIBLE] | None = None
    evidenceUrl: HttpsUrl | None = None
    reason: Annotated[ReportReason, Field(strict=False)] | None = None

    @model_validator(mode="after")
    def _reason_with_reports(self) -> AttestationPredicate:
        if (self.reason is not None) != (self.type is AttestationType.ISSUE_REPORT):
            raise ValueError("an issue_report names its reason, and only an issue_report does")
        return self
