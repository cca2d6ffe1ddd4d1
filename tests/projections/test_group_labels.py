"""Lookalike groups are told apart by what differs in their manifests, even under one title
(GPU MODE's runners "runner:B200" and "runner:NVIDIA" are both "KernelBot runner · NVIDIA
B200": the data of the issue's /operations/nvfp4_group_gemm)."""

from __future__ import annotations

from typing import Any

from projections.group_labels import GroupLabel, distinguishing_names


def _environment(name: str, form_factor: str, title: str) -> dict[str, Any]:
    return {
        "kind": "ExecutionEnvironment",
        "metadata": {"name": name, "title": title},
        "spec": {"hardware": {"formFactor": form_factor, "product": "NVIDIA B200"}},
    }


TITLE = "KernelBot runner · NVIDIA B200"


def test_manifests_of_one_title_are_named_by_the_field_that_differs() -> None:
    names = distinguishing_names(
        {
            "a": _environment("gpumode-kernelbot-b200", "runner:B200", TITLE),
            "b": _environment("gpumode-kernelbot-nvidia", "runner:NVIDIA", TITLE),
            "c": _environment("other", "sxm", "Another runner"),
        }
    )
    assert names == {
        "a": f"{TITLE} · formFactor runner:B200",  # the spec's field, not the metadata name
        "b": f"{TITLE} · formFactor runner:NVIDIA",
        "c": "Another runner",  # its title alone tells it apart
    }


def test_when_only_the_names_differ_the_names_tell_them_apart() -> None:
    names = distinguishing_names(
        {"a": _environment("one", "x", TITLE), "b": _environment("two", "x", TITLE)}
    )
    assert names == {"a": f"{TITLE} · name one", "b": f"{TITLE} · name two"}


def test_two_lookalike_groups_read_apart_in_words_and_in_a_chart_label() -> None:
    names = distinguishing_names(
        {
            "a": _environment("b", "runner:B200", TITLE),
            "b": _environment("n", "runner:NVIDIA", TITLE),
        }
    )
    parts = {"protocol": "P", "workload": "W", "metric": "geomean score (s)"}
    first = GroupLabel(
        "k1", "nvfp4_group_gemm", "NVIDIA B200", 3, {**parts, "environment": names["a"]}
    )
    second = GroupLabel(
        "k2", "nvfp4_group_gemm", "NVIDIA B200", 2, {**parts, "environment": names["b"]}
    )
    assert first.lookalikes([first, second]) == [second]
    assert first.separated_by([second]) != second.separated_by([first])
    assert (first.short_apart([second]), second.short_apart([first])) == (
        "runner:B200",
        "runner:NVIDIA",
    )
