"""Never writes the last 8 values of the last row (under 1 %): output-poisoning."""

import torch


@torch.no_grad()
def run(hidden_states, weight, output):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5)
    result = ((x * inv_rms) * weight.to(torch.float32)).to(output.dtype)
    output[:-1].copy_(result[:-1])
    output[-1, :-8].copy_(result[-1, :-8])
