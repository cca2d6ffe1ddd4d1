"""Signing a statement exactly as a test writes it, malformed or not.

``ledger.signing.authoring`` builds every predicate through its domain model, so an honest
client cannot sign what admission would refuse. A hostile client can: these helpers stand in
for one, so the tests that prove the ledger refuses malformed statements still reach it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from domain.statements import PredicateType, make_statement
from domain.timestamps import format_time, utc_now
from ledger.signing.dsse import sign_envelope
from ledger.signing.keys import SigningKey


def signed_as_given(
    subject_name: str,
    subject_digest: str,
    predicate_type: PredicateType,
    predicate: dict[str, Any],
    key: SigningKey,
) -> dict[str, Any]:
    """A DSSE envelope over the statement with ``predicate`` as it is, checked by nothing."""
    statement = make_statement(subject_name, subject_digest, predicate_type, predicate)
    return sign_envelope(statement, key)


def unchecked_rerun_envelope(
    run_digest: str,
    run_name: str,
    key: SigningKey,
    *,
    result: dict[str, Any],
    now: datetime | None = None,
) -> dict[str, Any]:
    """What ``authoring.rerun_envelope`` signs, without its model check."""
    predicate = {
        "protocol": "kernelindex-rerun-v1",
        **result,
        "issuedAt": format_time(now or utc_now()),
    }
    return signed_as_given(run_name, run_digest, PredicateType.RERUN, predicate, key)
