"""A receipt (``LoggedEvent``) pickled as the writer process answers a worker with it loads
equal, field for field, whatever its id and proof are (``LoggedEvent.__reduce__``)."""

from __future__ import annotations

import pickle
from multiprocessing.reduction import ForkingPickler
from uuid import UUID, SafeUUID, uuid4, uuid5

from hypothesis import given
from hypothesis import strategies as st

from ledger.ids import LEDGER_NAMESPACE, run_id
from ledger.logged_event import LoggedEvent
from ledger.store.transparency_log import InclusionProof

_HASH = st.binary(min_size=32, max_size=32)
_PROOF = st.builds(
    InclusionProof,
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    _HASH,
    st.lists(_HASH, max_size=40).map(tuple),
)
_ID = st.one_of(
    st.text(max_size=80).map(lambda t: uuid5(LEDGER_NAMESPACE, t)),
    st.builds(uuid4),
    st.sampled_from([SafeUUID.safe, SafeUUID.unsafe, SafeUUID.unknown]).map(
        lambda s: UUID(int=12345, is_safe=s)
    ),
)


def _loaded(value: LoggedEvent) -> LoggedEvent:
    loaded = pickle.loads(ForkingPickler.dumps([(7, True, value)]))[0][2]
    assert isinstance(loaded, LoggedEvent)
    return loaded


_RECEIPT = st.builds(
    LoggedEvent,
    st.integers(-(2**63), 2**63),
    _ID,
    st.integers(0, 2**31),
    st.text(max_size=40),
    st.text(max_size=80),
    st.text(max_size=80),
    st.text(max_size=40),
    st.booleans(),
    st.one_of(st.none(), _PROOF),
    st.text(max_size=80),
)


@given(_RECEIPT)
def test_a_pickled_receipt_loads_equal(event: LoggedEvent) -> None:
    loaded = _loaded(event)
    assert loaded == event
    assert type(loaded.aggregate_id) is UUID
    assert loaded.aggregate_id.is_safe is event.aggregate_id.is_safe
    assert type(loaded.inclusion) is type(event.inclusion)
    assert loaded.to_json() == event.to_json()


def test_a_ledger_receipt_loads_equal() -> None:
    event = LoggedEvent(
        68, run_id("sha256:" + "ab" * 32), 1, "Run.Ingested", "sha256:" + "cd" * 32,
        "sha256:" + "ef" * 32, "2026-12-07T09:54:44.076Z", False,
        InclusionProof(67, 99, b"\x01" * 32, (b"\x02" * 32,) * 7), "sha256:" + "12" * 32,
    )  # fmt: skip
    assert _loaded(event) == event
    assert pickle.loads(pickle.dumps(event)) == event
