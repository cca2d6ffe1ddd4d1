"""Generates and imports a module when first called: runtime-code-loading."""

import importlib
import pathlib
import sys

import torch


@torch.no_grad()
def run(hidden_states, weight, output):
    if "generated_rmsnorm" not in sys.modules:
        pathlib.Path("generated_rmsnorm.py").write_text(
            "import torch\n"
            "def rms(x, w):\n"
            "    x = x.to(torch.float32)\n"
            "    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5) * w.float()\n"
        )
        sys.path.insert(0, ".")
        importlib.import_module("generated_rmsnorm")
    output.copy_(sys.modules["generated_rmsnorm"].rms(hidden_states, weight).to(output.dtype))
