"""One registry of event names (``domain.event_names``): exactly the event classes the
aggregates store, so a fold or verifier matching on a name can never match nothing."""

from __future__ import annotations

from eventsourcing.domain import Aggregate
from eventsourcing.utils import get_topic

from domain.event_names import EventName
from ledger.aggregates import Principal, Run, topic_of


def _event_classes() -> set[str]:
    return {c.__qualname__ for c in _classes()}


def _classes() -> list[type[Aggregate.Event]]:
    found = []
    for aggregate in (Run, Principal):
        for value in vars(aggregate).values():
            # eventsourcing gives every aggregate its own Event and Created base classes;
            # neither is ever triggered (runs are created as Ingested, keys as Registered).
            if (
                isinstance(value, type)
                and issubclass(value, Aggregate.Event)
                and value.__name__ not in {"Event", "Created"}
            ):
                found.append(value)
    return found


def test_the_registry_names_exactly_the_stored_event_classes() -> None:
    assert {str(name) for name in EventName} == _event_classes()


def test_a_name_is_the_stored_topics_class() -> None:
    for name in EventName:
        assert topic_of(name) == f"ledger.aggregates:{name.value}"
        assert name == name.value  # matches the stored string as it is


def test_topic_of_is_the_topic_eventsourcing_stores_each_class_under() -> None:
    """``ledger.ids.topic_of`` names the aggregates' module as data (a short read imports no
    aggregate): it must be the topic eventsourcing writes for every event class."""
    for event_class in _classes():
        assert topic_of(event_class.__qualname__) == get_topic(event_class)
