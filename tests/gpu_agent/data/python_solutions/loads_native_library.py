"""Loads a native library when called (as a run-time-built extension would):
runtime-code-loading."""

import ctypes

import torch


@torch.no_grad()
def run(hidden_states, weight, output):
    ctypes.CDLL("libutil.so.1")
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5)
    output.copy_(((x * inv_rms) * weight.to(torch.float32)).to(output.dtype))
