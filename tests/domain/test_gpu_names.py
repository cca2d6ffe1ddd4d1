"""The one GPU-name matcher (domain.gpu_names): what people type, matched to stored names."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from domain.gpu_names import match_gpu

STORED = [
    "AMD Instinct MI300X",
    "AMD Instinct MI355X",
    "NVIDIA A100",
    "NVIDIA B200",
    "NVIDIA GB200",
    "NVIDIA H100",
    "NVIDIA L4",
]


def test_what_people_type_finds_the_stored_name() -> None:
    for typed, name in [
        ("B200", "NVIDIA B200"),  # a whole word: not GB200 too
        ("b200", "NVIDIA B200"),
        ("NVIDIA B200", "NVIDIA B200"),
        ("nvidia b200", "NVIDIA B200"),
        ("gb200", "NVIDIA GB200"),
        ("mi300x", "AMD Instinct MI300X"),
        ("MI355", "AMD Instinct MI355X"),  # a part of a word, when only one has it
        ("hopper", "NVIDIA H100"),  # an alias: the architecture's products here
        ("  h100 ", "NVIDIA H100"),
    ]:
        found = match_gpu(typed, STORED)
        assert found.name == name, (typed, found)


def test_a_name_that_could_mean_several_lists_them_and_none_matches_nothing() -> None:
    nvidia = match_gpu("nvidia", STORED)
    assert nvidia.name is None
    assert nvidia.candidates == tuple(n for n in STORED if n.startswith("NVIDIA"))
    mi3 = match_gpu("MI3", STORED)
    assert (mi3.name, mi3.candidates) == (None, ("AMD Instinct MI300X", "AMD Instinct MI355X"))
    blackwell = match_gpu("blackwell", STORED)
    assert blackwell.candidates == ("NVIDIA B200", "NVIDIA GB200") and blackwell.rule == "alias"
    for typed in ("tpu", "", "   "):
        found = match_gpu(typed, STORED)
        assert (found.name, found.candidates) == (None, ()), typed


@given(st.sampled_from(STORED), st.sampled_from([str.lower, str.upper, str.title, str]))
def test_every_stored_name_typed_in_any_case_is_itself(name: str, case: object) -> None:
    assert callable(case)
    assert match_gpu(case(name), STORED).name == name


@given(st.text(max_size=12), st.lists(st.text(min_size=1, max_size=20), max_size=6))
def test_a_match_is_always_one_of_the_known_and_candidates_are_too(
    typed: str, known: list[str]
) -> None:
    found = match_gpu(typed, known)
    assert set(found.candidates) <= set(known)
    if found.name is not None:
        assert found.name in known and found.candidates == (found.name,)
    else:
        assert len(found.candidates) != 1
