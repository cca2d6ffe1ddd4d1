"""What a client signs (``ledger.signing.authoring``) since the statement models became
msgspec Structs: the bytes it signed when it dumped the pydantic model it had checked."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from domain.canonical import canonical_json
from domain.errors import CanonicalizationError
from domain.statements import PredicateType, StatementError, make_statement
from ledger.signing.authoring import _signed
from ledger.signing.keys import SigningKey
from tests.domain import test_statement_structs as structs

KEY = SigningKey.generate()
DIGEST = "sha256:" + "ab" * 32


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), structs._documents())
def test_a_client_signs_the_bytes_it_signed_before(
    data: st.DataObject, typed: tuple[PredicateType, dict[str, Any]]
) -> None:
    """``_signed`` signs ``msgspec.to_builtins`` of the fields given, where it signed the
    pydantic model's ``model_dump(mode="json", exclude_unset=True)``: for every predicate
    both accept, the same canonical bytes (no default added or dropped). Two differences,
    both Python values JSON does not carry, where the dump changed what it was given and the
    client now signs nothing (canonical JSON refuses): a NaN in a manifest's free-form
    fields (the dump signed null), an integer beyond 2^53 in a float field (it signed the
    float). (A NaN is now refused before that, by build_predicate: what JSON cannot say.)"""
    predicate_type, document = typed
    fields = data.draw(structs.mutated(document))
    old = structs._oracle_predicate(predicate_type, fields, False)
    assume(old is not None)
    dumped = old.model_dump(mode="json", exclude_unset=True)
    try:
        before = canonical_json(make_statement("run", DIGEST, predicate_type, dumped))
    except CanonicalizationError:  # nor did the dump sign it
        with pytest.raises((CanonicalizationError, StatementError)):
            _signed("run", DIGEST, predicate_type, fields, KEY)
        return
    try:
        envelope = _signed("run", DIGEST, predicate_type, fields, KEY)
    except (CanonicalizationError, StatementError) as exc:
        # build_predicate refuses what JSON cannot say (a NaN) before canonical JSON would.
        assert any(w in exc.message for w in ("NaN", "safe integer", "finite number")), exc
        return
    assert base64.b64decode(envelope["payload"]) == before
