"""An admin's lifecycle predicate: a run retracted, or superseded by another."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictStr

from domain.statement_models.common import VISIBLE, Digest, SignedPredicate
from domain.statements import LifecycleAction


class LifecyclePredicate(SignedPredicate):
    action: Annotated[LifecycleAction, Field(strict=False)]
    reason: Annotated[StrictStr, Field(min_length=1, max_length=2000), VISIBLE]
    supersededBy: Digest | None = None
