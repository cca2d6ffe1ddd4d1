"""The in-toto Statement v1 envelope of every predicate: its type, one subject, the predicate."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictStr, ValidationError

from domain.statement_models.common import VISIBLE, Sha256Hex, StrictModel, describe
from domain.statements import PredicateType, StatementError


class Subject(StrictModel):
    name: Annotated[StrictStr, Field(min_length=1, max_length=500), VISIBLE]
    # Exactly {"sha256": hex}: an empty object passed, and every reader of the digest
    # failed with a KeyError (the verifier, and a 500 from the API; an attack review).
    digest: Annotated[dict[Literal["sha256"], Sha256Hex], Field(min_length=1)]


class Statement(StrictModel):
    type_: Literal["https://in-toto.io/Statement/v1"] = Field(alias="_type")
    subject: Annotated[list[Subject], Field(min_length=1, max_length=1)]
    predicateType: Annotated[PredicateType, Field(strict=False)]
    predicate: dict[str, Any]

    @property
    def subject_digest(self) -> str:
        return "sha256:" + self.subject[0].digest["sha256"]

    @property
    def subject_name(self) -> str:
        return self.subject[0].name


def parse_statement(value: object) -> Statement:
    try:
        return Statement.model_validate(value)
    except ValidationError as exc:
        raise StatementError("statement " + describe(exc, "")) from None
