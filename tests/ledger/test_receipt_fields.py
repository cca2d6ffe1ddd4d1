"""The writer's receipt made without the frozen dataclass's ``__init__``
(``ledger.admission_types.receipt_of``) is the receipt ``LoggedEvent(...)`` makes: the same
fields, in the same order, equal, hashed and pickled alike, for every field the class
declares (a field added to ``LoggedEvent`` and not to the fast road fails here)."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from ledger.admission_types import receipt_of
from ledger.logged_event import LoggedEvent
from ledger.store.transparency_log import InclusionProof

texts = st.text(max_size=20)
proofs = st.none() | st.builds(
    InclusionProof,
    leaf_index=st.integers(0, 10**6),
    tree_size=st.integers(1, 10**6),
    root=st.binary(min_size=32, max_size=32),
    hashes=st.lists(st.binary(min_size=32, max_size=32), max_size=3).map(tuple),
)
fields = st.fixed_dictionaries(
    {
        "position": st.integers(1, 10**9),
        "aggregate_id": st.uuids().map(lambda u: UUID(int=u.int)),
        "version": st.integers(1, 10**6),
        "event": texts,
        "subject_digest": texts,
        "envelope_digest": texts,
        "received_at": texts,
        "duplicate": st.booleans(),
        "inclusion": proofs,
        "signer": texts,
    }
)


def test_the_fast_road_names_every_field_of_the_class() -> None:
    declared = [f.name for f in dataclasses.fields(LoggedEvent)]
    sample: dict[str, Any] = {name: None for name in declared}
    assert list(vars(receipt_of(**sample))) == declared


@given(fields)
def test_the_fast_receipt_is_the_constructed_one(values: dict[str, Any]) -> None:
    fast = receipt_of(**values)
    made = LoggedEvent(**values)
    assert type(fast) is LoggedEvent
    assert list(vars(fast).items()) == list(vars(made).items())  # every field, in order
    assert fast == made
    assert hash(fast) == hash(made)
    assert fast.to_json() == made.to_json()
    assert pickle.loads(pickle.dumps(fast)) == made
    try:
        fast.position = 0  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("the fast receipt is not frozen")
