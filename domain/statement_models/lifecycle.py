"""An admin's lifecycle predicate: a run retracted, or superseded by another."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from domain.statement_models.common import Digest, SignedPredicate, visible
from domain.statements import LifecycleAction


class LifecyclePredicate(SignedPredicate, kw_only=True, frozen=True):
    action: LifecycleAction
    reason: Annotated[str, Meta(min_length=1, max_length=2000)]
    supersededBy: Digest | None = None

    _field_checks = (*SignedPredicate._field_checks, ("reason", visible))
