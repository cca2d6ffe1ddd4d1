"""Writes its result into the input too (like an in-place fused kernel): input-mutation."""

import torch


@torch.no_grad()
def run(hidden_states, weight, output):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5)
    output.copy_(((x * inv_rms) * weight.to(torch.float32)).to(output.dtype))
    hidden_states.copy_(output)
