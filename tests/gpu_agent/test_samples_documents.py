"""The sample solutions' documents: they parse, agree with each other and with their files."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpu_agent import inputs
from gpu_agent.backends.registry import SOLUTION_BINDING
from gpu_agent.definition import parse_definition
from gpu_agent.launch_spec import resolve_launch
from gpu_agent.samples import (
    SAMPLE_JOB_ID,
    SAMPLE_NONCE,
    SAMPLES,
    SAMPLES_DIR,
    SECRET_SAMPLE,
    all_samples,
    embedded_fingerprint_block,
    fingerprint_block,
    load_sample,
    stale_sources,
)
from gpu_agent.solution import check_against_definition, parse_solution
from gpu_agent.workload import parse_workloads_jsonl

NAMES = list(SAMPLES)


def test_every_sample_folder_is_registered_and_complete() -> None:
    folders = sorted(p.name for p in SAMPLES_DIR.iterdir() if (p / "solution.json").exists())
    assert folders == sorted(NAMES)
    for name in NAMES:
        for file in ("definition.json", "workload.jsonl", "solution.json", "kernel.cu"):
            assert (SAMPLES_DIR / name / file).is_file(), f"{name}/{file} is missing"


@pytest.mark.parametrize("name", NAMES)
def test_documents_parse_and_fit_together(name: str) -> None:
    sample = load_sample(name)
    definition = parse_definition(sample.definition)
    solution = parse_solution(sample.solution)
    workloads = parse_workloads_jsonl(sample.workload_text(), definition)
    check_against_definition(solution, definition)
    assert sample.solution["spec"]["binding"] == SOLUTION_BINDING
    assert sample.solution["spec"]["languages"] == ["cuda_cpp"]
    assert sample.solution["spec"]["destination_passing_style"] is True
    # Every var axis has a value in every workload, and every launch resolves for it.
    var_axes = {n for n, a in definition.axes.items() if a.kind == "var"}
    assert var_axes
    for workload in workloads:
        assert set(workload.axes) == var_axes
        axes = definition.resolve_axes(workload.axes)
        launch = resolve_launch(solution.launch, axes)
        assert all(n >= 1 for n in (*launch.grid, *launch.block))


@pytest.mark.parametrize("name", NAMES)
def test_launch_arguments_name_real_tensors_in_kernel_order(name: str) -> None:
    sample = load_sample(name)
    definition = parse_definition(sample.definition)
    inputs_ = {t.name for t in definition.inputs}
    outputs = {t.name for t in definition.outputs}
    args = sample.solution["spec"]["launch"]["args"]
    for arg in args:
        if "input" in arg:
            assert arg["input"] in inputs_
        elif "output" in arg:
            assert arg["output"] in outputs
        else:
            assert arg["scalar"] in {"int32", "int64", "uint32", "float32"}
    # The kernel's parameter list has as many entries as the launch passes.
    entry = sample.solution["spec"]["entry_point"].split("::")[1]
    source = (sample.folder / "kernel.cu").read_text("utf-8")
    match = re.search(rf"{entry}\s*\(([^)]*)\)", source)
    assert match, f"no parameter list for {entry}"
    assert len(match.group(1).split(",")) == len(args)


@pytest.mark.parametrize("name", NAMES)
def test_entry_point_is_an_extern_c_global_kernel_in_the_entry_file(name: str) -> None:
    sample = load_sample(name)
    file, _, function = sample.solution["spec"]["entry_point"].partition("::")
    sources = {s["path"]: s["content"] for s in sample.solution["sources"]}
    assert file in sources
    pattern = (
        r'extern\s+"C"\s+__global__\s+(?:void\s+__launch_bounds__\([^)]*\)|'
        r"__launch_bounds__\([^)]*\)\s+void|void)\s+" + re.escape(function) + r"\s*\("
    )
    assert re.search(pattern, sources[file]), f'{function} is not an extern "C" __global__'
    assert "torch" not in sources[file] and "#include <torch" not in sources[file]


@pytest.mark.parametrize("name", NAMES)
def test_embedded_sources_match_the_kernel_files(name: str) -> None:
    assert stale_sources(load_sample(name)) == [], "run: python -m gpu_agent.samples sync"


def test_solution_names_are_distinct_and_samples_solve_known_definitions() -> None:
    samples = all_samples()
    assert len({s.solution["name"] for s in samples}) == len(samples)
    rms = {
        json.dumps(s.definition, sort_keys=True)
        for s in samples
        if s.definition["name"] == "rmsnorm_h4096"
    }
    assert len(rms) == 1, "every RMSNorm sample must carry the same definition"


def test_adversarial_samples_name_the_check_that_must_catch_them() -> None:
    for info in SAMPLES.values():
        if info.honest:
            assert info.caught_by is None
        else:
            assert info.caught_by in {"poison", "mutation", "tolerance", "floor", "refill"}
            assert load_sample(info.name).definition["name"] == "rmsnorm_h4096"
    readme = (SAMPLES_DIR / "README.md").read_text("utf-8")
    for name in NAMES:
        assert f"`{name}`" in readme


def _shape_of(definition: dict[str, Any]) -> dict[str, Any]:
    """Axes and tensors without their descriptions: what makes two definitions the same."""
    return {
        part: {
            name: {k: v for k, v in spec.items() if k != "description"}
            for name, spec in definition[part].items()
        }
        for part in ("axes", "inputs", "outputs")
    }


def test_rmsnorm_definition_matches_sol_execbench(shared: Path) -> None:
    path = shared / "fixtures" / "sol-execbench" / "cuda_cpp-rmsnorm" / "definition.json"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    theirs = json.loads(path.read_text("utf-8"))
    ours = load_sample("rmsnorm_h4096_bf16").definition
    assert ours["name"] == theirs["name"]
    assert _shape_of(ours) == _shape_of(theirs)


# --- adv_secret_round_wrong knows exactly the public inputs ---------------------------------


def test_secret_sample_table_is_current() -> None:
    kernel = (SAMPLES_DIR / SECRET_SAMPLE / "kernel.cu").read_text("utf-8")
    assert embedded_fingerprint_block(kernel) == fingerprint_block(), (
        "gpu_agent/inputs.py changed how inputs are drawn: run python -m gpu_agent.samples sync"
    )


def test_secret_sample_recognises_public_rounds_only() -> None:
    sample = load_sample(SECRET_SAMPLE)
    definition = parse_definition(sample.definition)
    kernel = (sample.folder / "kernel.cu").read_text("utf-8")
    table = {
        (int(a, 16), int(b, 16))
        for a, b in re.findall(r"\{0x([0-9a-f]{8})u, 0x([0-9a-f]{8})u\}", kernel)
    }
    for workload in parse_workloads_jsonl(sample.workload_text(), definition):
        for round_ in [
            *inputs.correctness_rounds(SAMPLE_JOB_ID, SAMPLE_NONCE, workload.uuid),
            inputs.post_timing_round(SAMPLE_NONCE, workload.uuid),
        ]:
            hidden = inputs.generate(definition, workload, round_.seed)["hidden_states"]
            assert isinstance(hidden, np.ndarray)
            words = hidden.reshape(-1)[:4].view(np.uint16).astype(np.uint32)
            key = (int(words[0] | words[1] << 16), int(words[2] | words[3] << 16))
            assert (key in table) == (round_.kind == "public"), round_.label
