"""``domain.frozen.made`` gives the instance a frozen dataclass's ``__init__`` gives, for each
class the fold makes that way (hypothesis): equal, with the same ``__dict__`` in the same
order, still frozen, and with ``__post_init__``'s checks (the same error when they refuse).
Classes it cannot make exactly are refused."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.evidence import (
    EvidenceLevel,
    EvidenceResult,
    EvidenceState,
    IngestionFacts,
    initial_result,
)
from domain.frozen import field_names, made
from domain.ranking import RankedEntry, RankEntry, View
from domain.run_facts import RunProfile

anything = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
numbers = st.none() | st.floats() | st.integers(-5, 10**12) | st.booleans()


def values_for(cls: type[Any]) -> st.SearchStrategy[dict[str, Any]]:
    special = {
        "claimed_ns": numbers,
        "tolerance": numbers,
        "level": st.sampled_from(list(EvidenceLevel)),
        "view": st.sampled_from(list(View)),
        "reasons": st.lists(st.text(max_size=5), max_size=3).map(tuple),
    }
    return st.fixed_dictionaries(
        {f.name: special.get(f.name, anything) for f in dataclasses.fields(cls)}
    )


def outcome(make: Any) -> Any:
    try:
        instance = make()
    except Exception as exc:
        return ("error", type(exc), str(exc))
    return ("value", instance, list(vars(instance).items()))


CLASSES = [RunProfile, EvidenceResult, IngestionFacts, RankEntry, RankedEntry]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_made_is_the_init(cls: type[Any]) -> None:
    @settings(max_examples=150, deadline=None)
    @given(values_for(cls))
    def check(drawn: dict[str, Any]) -> None:
        values = {name: drawn[name] for name in field_names(cls)}
        got = outcome(lambda: made(cls, values))
        want = outcome(lambda: cls(**values))
        assert got[0] == want[0]
        if got[0] == "error":
            assert got == want
            return
        assert got[1] == want[1] or got[2] == want[2]  # NaN fields: compare the dicts' items
        assert repr(got[1]) == repr(want[1])
        assert [k for k, _ in got[2]] == [k for k, _ in want[2]]
        with pytest.raises(dataclasses.FrozenInstanceError):
            got[1].x = 1

    check()


def test_an_evidence_state_is_made_as_its_init_makes_it() -> None:
    facts = IngestionFacts(1, "passed", True, False, "B200", "sm_100", "mean", 12.0)
    made_state = EvidenceState.start(facts)
    plain = EvidenceState(facts, initial_result(facts), initial_result(facts), 1)
    assert made_state == plain and list(vars(made_state)) == list(vars(plain))


def test_made_refuses_what_it_cannot_make_exactly() -> None:
    @dataclasses.dataclass
    class Mutable:
        a: int

    @dataclasses.dataclass(frozen=True)
    class WithInitVar:
        a: int
        b: dataclasses.InitVar[int]

        def __post_init__(self, b: int) -> None:
            pass

    @dataclasses.dataclass(frozen=True)
    class NotInInit:
        a: int
        b: int = dataclasses.field(default=0, init=False)

    for cls in (Mutable, WithInitVar, NotInInit):
        with pytest.raises(TypeError):
            field_names(cls)
    with pytest.raises(TypeError):
        made(EvidenceResult, {"level": EvidenceLevel.REPORTED})  # a field missing
    with pytest.raises(TypeError):  # fields out of order
        made(
            EvidenceResult,
            {"reasons": (), "level": EvidenceLevel.REPORTED, "caused_by": 1, "policy_version": ""},
        )
