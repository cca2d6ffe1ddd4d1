"""Honest for its first 4 calls (the rounds before timing), then does nothing: timing-audit."""

import torch

_CALLS = [0]


@torch.no_grad()
def run(hidden_states, weight, output):
    _CALLS[0] += 1
    if _CALLS[0] > 4:
        return
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5)
    output.copy_(((x * inv_rms) * weight.to(torch.float32)).to(output.dtype))
