"""Deterministic per-round inputs (gpu_agent/inputs.py)."""

from __future__ import annotations

import hashlib

import ml_dtypes
import numpy as np

from gpu_agent import inputs
from gpu_agent.definition import parse_definition
from gpu_agent.workload import parse_workload

JOB = "00000000-0000-4000-8000-000000000001"
NONCE = "ab" * 32

DEFINITION = parse_definition(
    {
        "name": "mixed",
        "axes": {"n": {"type": "var"}, "k": {"type": "const", "value": 8}},
        "inputs": {
            "x": {"shape": ["n", "k"], "dtype": "bfloat16"},
            "idx": {"shape": ["n"], "dtype": "int32"},
            "mask": {"shape": ["k"], "dtype": "bool"},
            "scale": {"shape": None, "dtype": "float32"},
            "bias": {"shape": [], "dtype": "float16"},
        },
        "outputs": {"y": {"shape": ["n", "k"], "dtype": "float32"}},
    }
)
WORKLOAD = parse_workload(
    {
        "uuid": "case-1",
        "axes": {"n": 3},
        "inputs": {
            "x": {"type": "random"},
            "idx": {"type": "random"},
            "mask": {"type": "random"},
            "scale": {"type": "scalar", "value": 0.5},
            "bias": {"type": "scalar", "value": 2},
        },
    },
    DEFINITION,
)


def test_seeds_are_the_documented_hashes() -> None:
    text = f"kernelindex-rerun-v1|public|{JOB}|case-1|0"
    expected = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    assert inputs.public_seed(JOB, "case-1", 0) == expected
    text = f"kernelindex-rerun-v1|secret|{NONCE}|case-1"
    expected = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    assert inputs.secret_seed(NONCE, "case-1") == expected


def test_rounds_two_public_one_secret_shuffled_by_the_nonce() -> None:
    rounds = inputs.correctness_rounds(JOB, NONCE, "case-1")
    assert sorted(r.label for r in rounds) == ["public-0", "public-1", "secret"]
    assert len({r.seed for r in rounds}) == 3
    # The public seeds do not depend on the nonce, the secret one only on it.
    other = {r.label: r.seed for r in inputs.correctness_rounds(JOB, "cd" * 32, "case-1")}
    mine = {r.label: r.seed for r in rounds}
    assert other["public-0"] == mine["public-0"] and other["public-1"] == mine["public-1"]
    assert other["secret"] != mine["secret"]
    # Over many nonces the secret round lands in every position.
    positions = {
        [r.label for r in inputs.correctness_rounds(JOB, f"{i:064x}", "case-1")].index("secret")
        for i in range(30)
    }
    assert positions == {0, 1, 2}
    assert inputs.post_timing_round(NONCE, "case-1").seed not in {r.seed for r in rounds}
    assert inputs.public_seed(JOB, "case-2", 0) != mine["public-0"]


def test_generation_is_deterministic_and_typed() -> None:
    seed = inputs.public_seed(JOB, "case-1", 0)
    first = inputs.generate(DEFINITION, WORKLOAD, seed)
    again = inputs.generate(DEFINITION, WORKLOAD, seed)
    other = inputs.generate(DEFINITION, WORKLOAD, seed + 1)
    assert list(first) == ["x", "idx", "mask", "scale", "bias"]
    x, idx, mask = first["x"], first["idx"], first["mask"]
    assert isinstance(x, np.ndarray) and x.dtype == ml_dtypes.bfloat16 and x.shape == (3, 8)
    assert isinstance(idx, np.ndarray) and idx.dtype == np.int32
    assert idx.min() >= 0 and idx.max() < inputs.INT_HIGH
    assert isinstance(mask, np.ndarray) and mask.dtype == np.bool_
    assert first["scale"] == np.float32(0.5) and isinstance(first["scale"], np.float32)
    bias = first["bias"]
    assert isinstance(bias, np.ndarray) and bias.shape == () and bias.dtype == np.float16
    for name in ("x", "idx", "mask"):
        assert np.array_equal(np.asarray(first[name]), np.asarray(again[name]))
    assert not np.array_equal(np.asarray(first["x"]), np.asarray(other["x"]))


def test_output_shapes_are_what_the_floor_counts() -> None:
    # Only outputs are provably written (stats.roofline_floor): y is 3·8 float32.
    shapes = inputs.output_shapes(DEFINITION, WORKLOAD)
    assert shapes == {"y": ((3, 8), np.dtype(np.float32))}
