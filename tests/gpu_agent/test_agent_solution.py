"""SOL-ExecBench documents as the agent reads them (gpu_agent/solution.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpu_agent.checks import Tolerance
from gpu_agent.definition import parse_definition
from gpu_agent.expressions import LaunchSpecError
from gpu_agent.launch_spec import resolve_launch
from gpu_agent.sol_parsing import SolutionError, UnsupportedSolution
from gpu_agent.solution import check_against_definition, parse_solution
from gpu_agent.workload import parse_workload, parse_workloads_jsonl, refuse_custom_inputs

RMSNORM_DEFINITION: dict[str, Any] = {
    "name": "rmsnorm_h4096",
    "axes": {
        "batch_size": {"type": "var", "description": None},
        "hidden_size": {"type": "const", "value": 4096},
    },
    "inputs": {
        "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
        "weight": {"shape": ["hidden_size"], "dtype": "bfloat16"},
    },
    "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
    "reference": "import torch\n...",
}

SOLUTION: dict[str, Any] = {
    "name": "rmsnorm_pycuda",
    "definition": "rmsnorm_h4096",
    "author": "tests",
    "spec": {
        "languages": ["cuda_cpp"],
        "target_hardware": ["B200"],
        "entry_point": "kernel.cu::rmsnorm_h4096_bf16",
        "dependencies": [],
        "binding": "pycuda",
        "compile_options": {"cuda_cflags": ["-O3"]},
        "launch": {
            "grid": ["batch_size"],
            "block": ["512"],
            "sharedMemBytes": "0",
            "args": [
                {"input": "hidden_states"},
                {"input": "weight"},
                {"output": "output"},
                {"scalar": "int32", "value": "batch_size"},
                {"scalar": "float32", "value": 1e-05},
            ],
        },
    },
    "sources": [
        {"path": "kernel.cu", "content": 'extern "C" __global__ void rmsnorm_h4096_bf16() {}'},
        {"path": "include/common.cuh", "content": "#pragma once"},
    ],
}


def _solution(**spec_changes: Any) -> dict[str, Any]:
    solution = copy.deepcopy(SOLUTION)
    for key, value in spec_changes.items():
        if value is None:
            solution["spec"].pop(key, None)
        else:
            solution["spec"][key] = value
    return solution


def _sol(shared: Path, *parts: str) -> Any:
    return json.loads((shared / "fixtures" / "sol-execbench" / Path(*parts)).read_text())


def test_pycuda_solution_is_accepted() -> None:
    solution = parse_solution(SOLUTION)
    assert solution.entry_file == "kernel.cu"
    assert solution.kernel_name == "rmsnorm_h4096_bf16"
    assert solution.entry_point == "kernel.cu::rmsnorm_h4096_bf16"
    assert set(solution.sources) == {"kernel.cu", "include/common.cuh"}
    assert solution.cuda_cflags == ("-O3",)
    assert len(solution.launch.args) == 5
    check_against_definition(solution, parse_definition(RMSNORM_DEFINITION))


def test_sample_solution_of_the_repository_is_accepted() -> None:
    sample = Path(__file__).resolve().parents[2] / "gpu_agent" / "samples" / "rmsnorm_h4096_bf16"
    if not (sample / "solution.json").exists():
        pytest.skip("the rmsnorm sample is not in this checkout")
    solution = parse_solution(json.loads((sample / "solution.json").read_text()))
    definition = parse_definition(json.loads((sample / "definition.json").read_text()))
    check_against_definition(solution, definition)
    workloads = parse_workloads_jsonl((sample / "workload.jsonl").read_text(), definition)
    for workload in workloads:
        resolve_launch(solution.launch, definition.resolve_axes(workload.axes))


def test_the_fixtures_torch_binding_solution_is_refused_with_the_reason(shared: Path) -> None:
    with pytest.raises(UnsupportedSolution) as caught:
        parse_solution(_sol(shared, "cuda_cpp-rmsnorm", "solution_cuda.json"))
    message = str(caught.value)
    assert 'only runs solutions with spec.binding "pycuda"' in message
    assert "binding 'torch'" in message
    assert "host C++" in message
    assert "gpu_agent/python_solutions" in message  # where such solutions go instead


def test_default_binding_is_torch_and_refused() -> None:
    solution = _solution(binding=None)
    with pytest.raises(UnsupportedSolution, match='SOL\'s default "torch" binding'):
        parse_solution(solution)


@pytest.mark.parametrize(
    "path",
    [
        ("triton-rmsnorm", "solution_triton.json"),
        ("pytorch-linear_backward", "solution_python.json"),
        ("reward-hacks", "solution_hack_monkey_patch.json"),
        ("reward-hacks", "solution_hack_lazy_output.json"),
        ("cuda_cpp-flux_rope", "solution_cuda.json"),
    ],
)
def test_every_fixture_solution_of_another_binding_is_refused(
    shared: Path, path: tuple[str, str]
) -> None:
    with pytest.raises(UnsupportedSolution, match=r"only runs solutions with spec\.binding"):
        parse_solution(_sol(shared, *path))


def test_python_solutions_are_refused_as_python(shared: Path) -> None:
    with pytest.raises(UnsupportedSolution, match="Python entry point"):
        parse_solution(_sol(shared, "triton-rmsnorm", "solution_triton.json"))


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"languages": ["triton"]}, UnsupportedSolution, 'spec.languages \\["cuda_cpp"\\]'),
        ({"dependencies": ["cublas"]}, UnsupportedSolution, "dependencies"),
        ({"entry_point": "kernel.cu"}, SolutionError, "entry_point"),
        ({"entry_point": "kernel.cpp::run"}, SolutionError, "entry_point"),
        ({"entry_point": "kernel.cu::not-an-identifier"}, SolutionError, "entry_point"),
        ({"entry_point": "other.cu::k"}, SolutionError, "not among the sources"),
        ({"launch": None}, SolutionError, "missing 'launch'"),
    ],
)
def test_spec_errors(changes: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        parse_solution(_solution(**changes))


@pytest.mark.parametrize(
    ("launch_changes", "message"),
    [
        ({"grid": []}, "grid must be a list of 1 to 3"),
        ({"grid": [1.5]}, "expression string or integer"),
        ({"block": None}, "block must be a list"),
        ({"sharedMemBytes": 1.0}, "sharedMemBytes"),
        ({"args": [{"input": "a", "output": "b"}]}, "must be"),
        ({"args": [{"tensor": "a"}]}, "must be"),
        ({"args": [{"input": "a", "extra": 1}]}, "takes nothing else"),
        ({"args": [{"scalar": "int8", "value": 1}]}, "scalar type 'int8'"),
        ({"args": [{"scalar": "int32", "value": 1.5}]}, "must be an integer"),
        ({"args": [{"scalar": "int32"}]}, "scalar argument is"),
        ({"args": [{"scalar": "int32", "value": True}]}, "expression string or a number"),
        ({"stream": 1}, "unknown fields"),
    ],
)
def test_launch_errors(launch_changes: dict[str, Any], message: str) -> None:
    solution = _solution()
    solution["spec"]["launch"].update(launch_changes)
    if launch_changes.get("block", 0) is None:
        del solution["spec"]["launch"]["block"]
    with pytest.raises(SolutionError, match=message):
        parse_solution(solution)


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ([{"path": "../kernel.cu", "content": ""}], "relative path"),
        ([{"path": "/kernel.cu", "content": ""}], "relative path"),
        ([{"path": "a/./kernel.cu", "content": ""}], "relative path"),
        (
            [{"path": "kernel.cu", "content": ""}, {"path": "kernel.cu", "content": ""}],
            "duplicate",
        ),
        ([{"path": "kernel.cu"}], "missing 'content'"),
        ([], "1 to 64 sources"),
    ],
)
def test_source_errors(sources: list[dict[str, Any]], message: str) -> None:
    solution = _solution()
    solution["sources"] = sources
    with pytest.raises(SolutionError, match=message):
        parse_solution(solution)


def test_launch_is_checked_against_the_definition() -> None:
    definition = parse_definition(RMSNORM_DEFINITION)
    wrong_input = _solution()
    wrong_input["spec"]["launch"]["args"][0] = {"input": "x"}
    with pytest.raises(SolutionError, match="'x' is not an input"):
        check_against_definition(parse_solution(wrong_input), definition)
    output_as_input = _solution()
    output_as_input["spec"]["launch"]["args"][2] = {"input": "output"}
    with pytest.raises(SolutionError, match="'output' is not an input"):
        check_against_definition(parse_solution(output_as_input), definition)
    no_output = _solution()
    del no_output["spec"]["launch"]["args"][2]
    with pytest.raises(SolutionError, match=r"never passes output\(s\) \['output'\]"):
        check_against_definition(parse_solution(no_output), definition)
    other = copy.deepcopy(SOLUTION)
    other["definition"] = "gemm"
    with pytest.raises(SolutionError, match="solves 'gemm'"):
        check_against_definition(parse_solution(other), definition)


def test_resolve_launch_for_a_workload() -> None:
    solution = parse_solution(SOLUTION)
    launch = resolve_launch(solution.launch, {"batch_size": 7, "hidden_size": 4096})
    assert launch.grid == (7, 1, 1)
    assert launch.block == (512, 1, 1)
    assert launch.shared_mem_bytes == 0
    kinds = [kind for kind, _ in launch.args]
    assert kinds == ["input", "input", "output", "scalar", "scalar"]
    rows, eps = launch.args[3][1], launch.args[4][1]
    assert rows.dtype == np.int32 and int(rows) == 7
    assert eps.dtype == np.float32 and float(eps) == pytest.approx(1e-5)

    too_big = _solution()
    too_big["spec"]["launch"]["args"][3] = {"scalar": "int32", "value": "batch_size * 2147483647"}
    with pytest.raises(LaunchSpecError, match=r"int32 scalar .* out of range"):
        resolve_launch(parse_solution(too_big).launch, {"batch_size": 7, "hidden_size": 4096})
    negative = _solution()
    negative["spec"]["launch"]["args"][3] = {"scalar": "uint32", "value": "-1"}
    with pytest.raises(LaunchSpecError, match="out of range"):
        resolve_launch(parse_solution(negative).launch, {"batch_size": 7, "hidden_size": 4096})


def test_fixture_definitions_and_workloads(shared: Path) -> None:
    rmsnorm = parse_definition(_sol(shared, "cuda_cpp-rmsnorm", "definition.json"))
    assert [s.name for s in rmsnorm.inputs] == ["hidden_states", "weight"]
    text = (shared / "fixtures/sol-execbench/cuda_cpp-rmsnorm/workload.jsonl").read_text()
    workloads = parse_workloads_jsonl(text, rmsnorm)
    assert len(workloads) == len(text.splitlines())
    first = workloads[0]
    assert rmsnorm.resolve_axes(first.axes) == {"batch_size": 7, "hidden_size": 4096}
    assert first.tolerance == Tolerance(atol=1e-2, rtol=1e-2, required_matched_ratio=0.99)

    rope = parse_definition(_sol(shared, "cuda_cpp-flux_rope", "definition.json"))
    axes = rope.resolve_axes({"batch_size": 2, "seq_len": 211})
    assert axes["half_head_dim"] == 64
    assert rope.shape(rope.inputs[0], axes) == (2, 211, 24, 128)

    linear = parse_definition(_sol(shared, "pytorch-linear_backward", "definition.json"))
    assert linear.custom_inputs_entrypoint == "generate_inputs"
    assert linear.reference is not None and "def run(grad_output, x, weight)" in linear.reference
    line = (shared / "fixtures/sol-execbench/pytorch-linear_backward/workload.jsonl").read_text()
    custom = parse_workloads_jsonl(line, linear)[0]
    assert {s.kind for s in custom.inputs.values()} == {"custom"}
    # Only the Python path runs the definition's generator; the declarative one refuses it.
    with pytest.raises(UnsupportedSolution, match="custom_inputs_entrypoint"):
        refuse_custom_inputs(custom)


def test_workload_input_sources_and_tolerance() -> None:
    definition_doc = copy.deepcopy(RMSNORM_DEFINITION)
    definition_doc["inputs"]["eps"] = {"shape": None, "dtype": "float32"}
    definition_doc["tolerance"] = {"max_atol": 0.5, "required_matched_ratio": 1.0}
    definition = parse_definition(definition_doc)
    base: dict[str, Any] = {
        "uuid": "w1",
        "axes": {"batch_size": 3},
        "inputs": {
            "hidden_states": {"type": "random"},
            "weight": {"type": "random"},
            "eps": {"type": "scalar", "value": 1e-6},
        },
        "tolerance": {"max_atol": 1e-3, "max_error_cap": 0.1},
    }
    workload = parse_workload(base, definition)
    assert workload.inputs["eps"].value == 1e-6
    # Workload over definition over SOL defaults, field by field.
    assert workload.tolerance == Tolerance(
        atol=1e-3, rtol=1e-2, required_matched_ratio=1.0, max_error_cap=0.1
    )

    def broken(**changes: Any) -> dict[str, Any]:
        doc = copy.deepcopy(base)
        doc.update(changes)
        return doc

    cases = [
        (broken(inputs={**base["inputs"], "weight": {"type": "safetensors"}}), "safetensors"),
        (broken(inputs={**base["inputs"], "weight": {"type": "zeros"}}), "unknown type"),
        (broken(inputs={"hidden_states": {"type": "random"}}), "no descriptor for input"),
        (broken(inputs={**base["inputs"], "bias": {"type": "random"}}), "unknown inputs"),
        (broken(inputs={**base["inputs"], "eps": {"type": "random"}}), "needs a scalar value"),
        (broken(axes={}), "no value for var axis 'batch_size'"),
        (broken(axes={"batch_size": 3, "hidden_size": 8}), "const axis 'hidden_size'"),
        (broken(axes={"batch_size": 3, "heads": 8}), "not an axis"),
        (broken(axes={"batch_size": -1}), "non-negative integer"),
        (broken(axes={"batch_size": True}), "non-negative integer"),
        (broken(tolerance={"max_atol": -1}), "non-negative number"),
        (broken(tolerance={"atol": 1}), "unknown fields"),
        (broken(tolerance={"required_matched_ratio": 1.5}), "at most 1"),
        (broken(uuid=""), "1..200"),
    ]
    for doc, message in cases:
        with pytest.raises(SolutionError, match=message):
            parse_workload(doc, definition)


def test_definition_errors_and_constraints() -> None:
    doc = copy.deepcopy(RMSNORM_DEFINITION)
    doc["inputs"]["hidden_states"]["dtype"] = "float4_e2m1"
    with pytest.raises(UnsupportedSolution, match="float4_e2m1"):
        parse_definition(doc)
    doc = copy.deepcopy(RMSNORM_DEFINITION)
    doc["inputs"]["weight"]["shape"] = ["width"]
    with pytest.raises(SolutionError, match="unknown axis 'width'"):
        parse_definition(doc)
    doc = copy.deepcopy(RMSNORM_DEFINITION)
    doc["axes"]["hidden_size"] = {"type": "fixed", "value": 1}
    with pytest.raises(SolutionError, match="const, var or expr"):
        parse_definition(doc)

    gqa: dict[str, Any] = {
        "name": "gqa",
        "axes": {
            "H_qo": {"type": "var"},
            "H_kv": {"type": "var"},
            "H_r": {"type": "const", "value": 4},
            "total": {"type": "expr", "expression": "double // 2"},
            "double": {"type": "expr", "expression": "H_qo * 2"},
        },
        "constraints": ["H_qo == H_kv * H_r"],
        "inputs": {"q": {"shape": ["H_qo"], "dtype": "float16"}},
        "outputs": {"o": {"shape": ["total"], "dtype": "float16"}},
    }
    definition = parse_definition(gqa)
    assert definition.resolve_axes({"H_qo": 8, "H_kv": 2})["total"] == 8  # out of order exprs
    with pytest.raises(SolutionError, match="does not hold"):
        definition.resolve_axes({"H_qo": 8, "H_kv": 3})
    cyclic = copy.deepcopy(gqa)
    cyclic["axes"]["double"]["expression"] = "total * 2"
    with pytest.raises(SolutionError, match="refer to each other"):
        parse_definition(cyclic).resolve_axes({"H_qo": 8, "H_kv": 2})
