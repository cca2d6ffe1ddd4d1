"""One registry of event names (``domain.event_names``): exactly the event classes the
aggregates store, so a fold or verifier matching on a name can never match nothing."""

from __future__ import annotations

from eventsourcing.domain import Aggregate

from domain.event_names import EventName
from ledger.aggregates import Principal, Run, topic_of


def _event_classes() -> set[str]:
    found = set()
    for aggregate in (Run, Principal):
        for value in vars(aggregate).values():
            # eventsourcing gives every aggregate its own Event and Created base classes;
            # neither is ever triggered (runs are created as Ingested, keys as Registered).
            if (
                isinstance(value, type)
                and issubclass(value, Aggregate.Event)
                and value.__name__ not in {"Event", "Created"}
            ):
                found.add(value.__qualname__)
    return found


def test_the_registry_names_exactly_the_stored_event_classes() -> None:
    assert {str(name) for name in EventName} == _event_classes()


def test_a_name_is_the_stored_topics_class() -> None:
    for name in EventName:
        assert topic_of(name) == f"ledger.aggregates:{name.value}"
        assert name == name.value  # matches the stored string as it is
