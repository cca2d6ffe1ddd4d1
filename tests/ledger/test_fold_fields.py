"""The fold fields' own rules (``ledger.store.fold_fields``): the run events' topics it names
as data are the aggregates' own, every run event and no other gets a run event's row, and a
row reads back as it was written. (That the views folded from the rows equal those folded
from the events is ``tests/projections/test_rebuild_from_fold_fields.py``.)"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.documents import parse_admitted_json
from domain.event_names import EventName
from ledger.aggregates import Principal, topic_of
from ledger.store.fold_fields import (
    RUN_EVENT_TOPICS,
    FoldFields,
    decode_fields,
    encode_fields,
    fields_of_event,
    fields_of_payload,
    predicate_of,
)
from tests.decoded_events import RUN_CLASSES


def test_the_run_event_topics_are_the_aggregates_own() -> None:
    assert {
        topic_of(name): name for name in EventName if name.startswith("Run.")
    } == RUN_EVENT_TOPICS
    for cls in RUN_CLASSES:
        assert RUN_EVENT_TOPICS[f"{cls.__module__}:{cls.__qualname__}"] == cls.__qualname__


class _KeyEvent:
    """Stands in for a key book event: only its class's topic matters."""


_KeyEvent.__module__ = Principal.Registered.__module__
_KeyEvent.__qualname__ = Principal.Registered.__qualname__


def test_an_event_of_the_key_book_has_nothing_to_fold() -> None:
    fields = fields_of_event(_KeyEvent())
    assert fields is not None and fields.name is None and fields.event_name is None


# What admission admits: no NUL in any string (the strict reader refuses it).
texts = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)


@given(
    st.sampled_from([str(n) for n in EventName if n.startswith("Run.")] + [None]),
    st.text(),
    st.text(),
    st.text(),
    st.none() | st.text(),
    json_values,
)
def test_a_row_reads_back_as_written(
    name: str | None, subject: str, received: str, signer: str, by: str | None, predicate: Any
) -> None:
    fields = FoldFields(name, subject, received, signer, by, msgspec.json.encode(predicate))
    back = decode_fields(encode_fields(fields))
    assert back == fields
    assert predicate_of(back) == predicate


@given(json_values, json_values)
def test_the_predicate_is_the_statements_as_its_reader_reads_it(
    subject_digest: Any, predicate: Any
) -> None:
    """The row's predicate, parsed, is the predicate of the statement as the fold read it
    before (``parse_admitted_json`` of the whole payload), whatever else the statement holds."""
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "x", "digest": {"sha256": subject_digest}}],
        "predicateType": "https://kernelindex.dev/x",
        "predicate": predicate,
    }
    payload = msgspec.json.encode(statement)
    fields = fields_of_payload(EventName.RUN_ATTESTED, payload, "at", "key", None)
    whole = parse_admitted_json(payload)
    assert predicate_of(fields) == whole["predicate"]
    assert fields.subject == "sha256:" + str(whole["subject"][0]["digest"]["sha256"])


def test_a_row_naming_no_run_event_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError):
        decode_fields(encode_fields(FoldFields("Principal.Registered", "sha256:00")))
