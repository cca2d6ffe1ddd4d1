"""The in-toto Statement v1 envelope of every predicate: its type, one subject, the predicate."""

# No ``from __future__ import annotations``: msgspec reads these Structs' annotations as
# objects, not strings it would compile and evaluate when each is first used (issue 33).

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from domain.statement_models.common import Sha256Hex, StrictModel, describe, visible
from domain.statements import PredicateType, StatementError


class Subject(StrictModel, frozen=True):
    name: Annotated[str, Meta(min_length=1, max_length=500)]
    # Exactly {"sha256": hex}: an empty object passed, and every reader of the digest
    # failed with a KeyError (the verifier, and a 500 from the API; an attack review).
    digest: Annotated[dict[Literal["sha256"], Sha256Hex], Meta(min_length=1)]

    _field_checks = (("name", visible),)


class Statement(StrictModel, frozen=True):
    type_: Literal["https://in-toto.io/Statement/v1"] = msgspec.field(name="_type")
    subject: Annotated[list[Subject], Meta(min_length=1, max_length=1)]
    predicateType: PredicateType
    predicate: dict[str, Any]

    @property
    def subject_digest(self) -> str:
        return "sha256:" + self.subject[0].digest["sha256"]

    @property
    def subject_name(self) -> str:
        return self.subject[0].name


def parse_statement(value: object) -> Statement:
    try:  # no rule of the statement itself depends on stored or admitting
        return msgspec.convert(value, type=Statement, strict=True)
    except msgspec.ValidationError as exc:
        raise StatementError("statement " + describe(exc, "", value)) from None
