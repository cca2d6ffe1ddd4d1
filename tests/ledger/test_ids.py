"""``run_id`` and ``principal_id`` are exactly ``uuid5`` in the ledger's namespace: stored
aggregate ids, bundles and offline verifiers depend on every bit."""

from __future__ import annotations

import pickle
from uuid import UUID, uuid5

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger import ids

_TEXT = st.text(max_size=200)  # no lone surrogates: hypothesis draws UTF-8-encodable text


def _same(made: UUID, expected: UUID) -> None:
    assert type(made) is UUID
    assert made == expected
    assert made.int == expected.int
    assert str(made) == str(expected)
    assert made.version == expected.version == 5
    assert made.variant == expected.variant
    assert made.is_safe is expected.is_safe
    assert hash(made) == hash(expected)
    assert pickle.loads(pickle.dumps(made)) == expected


@given(_TEXT)
def test_ids_are_uuid5_in_the_ledger_namespace(name: str) -> None:
    _same(ids._uuid5(ids._RUN, name), uuid5(ids.LEDGER_NAMESPACE, "run:" + name))
    _same(ids._uuid5(ids._KEY, name), uuid5(ids.LEDGER_NAMESPACE, "key:" + name))


def test_the_memoised_ids_are_uuid5() -> None:
    digest = "sha256:" + "ab" * 32
    _same(ids.run_id(digest), uuid5(ids.LEDGER_NAMESPACE, "run:" + digest))
    _same(ids.principal_id(digest), uuid5(ids.LEDGER_NAMESPACE, "key:" + digest))
    # Pinned: a stored run's aggregate id never moves.
    assert ids.run_id("sha256:" + "00" * 32) == UUID("6b69e727-9a3e-55c7-8abb-1f9e9ec8d7f8")


def test_a_lone_surrogate_fails_as_uuid5_does() -> None:
    with pytest.raises(UnicodeEncodeError):
        uuid5(ids.LEDGER_NAMESPACE, "run:\ud800")
    with pytest.raises(UnicodeEncodeError):
        ids.run_id("\ud801")


@given(st.integers(0, 2**128 - 1))
def test_uuid_of_int_is_uuid_int(value: int) -> None:
    made = ids.uuid_of_int(value)
    expected = UUID(int=value)
    assert type(made) is UUID
    assert made == expected
    assert str(made) == str(expected)
    assert made.is_safe is expected.is_safe
    assert hash(made) == hash(expected)
    assert pickle.loads(pickle.dumps(made)) == expected
