"""Replaces the harness's comparison with one that always passes, then returns zeros:
harness-integrity (checked right after the import, before any call)."""

import torch

from gpu_agent.python_solutions import compare as _compare


def _always_equal(output, reference, tolerance, *, name="output"):
    return _compare.Comparison(True, 0.0, 0.0, None)


_compare.compare = _always_equal


@torch.no_grad()
def run(hidden_states, weight, output):
    output.zero_()
