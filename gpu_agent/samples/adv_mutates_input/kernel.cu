// ADVERSARIAL SAMPLE — must be refused. RMSNorm (rmsnorm_h4096) that also writes its result
// back into hidden_states, i.e. runs in place on an input it was given read-only. The output
// of every launch is correct (each launch reads the row before overwriting it), so only the
// input-mutation check (inputs hashed before and after the run) catches it.
//
// Launch: grid = (batch_size), block = (512); args: x, weight, out, rows, eps.
#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int kHidden = 4096;
constexpr int kThreads = 512;
constexpr int kVec = 8;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    rmsnorm_in_place_too(__nv_bfloat16* x, const __nv_bfloat16* __restrict__ weight,
                         __nv_bfloat16* __restrict__ out, int rows, float eps) {
  const int row = blockIdx.x;
  if (row >= rows) {
    return;
  }
  const int t = threadIdx.x;
  const size_t base = static_cast<size_t>(row) * kHidden;
  const uint4 xv = reinterpret_cast<const uint4*>(x + base)[t];
  const uint4 wv = __ldg(reinterpret_cast<const uint4*>(weight) + t);
  const __nv_bfloat162* xh = reinterpret_cast<const __nv_bfloat162*>(&xv);
  const __nv_bfloat162* wh = reinterpret_cast<const __nv_bfloat162*>(&wv);

  float f[kVec];
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec / 2; ++i) {
    const float2 p = __bfloat1622float2(xh[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
    sum_sq = fmaf(p.x, p.x, sum_sq);
    sum_sq = fmaf(p.y, p.y, sum_sq);
  }
  __shared__ float partial[kWarps];
  __shared__ float inv_rms;
  sum_sq = warp_sum(sum_sq);
  if ((t & 31) == 0) {
    partial[t >> 5] = sum_sq;
  }
  __syncthreads();
  if (t < 32) {
    float v = t < kWarps ? partial[t] : 0.0f;
    v = warp_sum(v);
    if (t == 0) {
      inv_rms = rsqrtf(v / static_cast<float>(kHidden) + eps);
    }
  }
  __syncthreads();
  const float r = inv_rms;

  uint4 ov;
  __nv_bfloat162* oh = reinterpret_cast<__nv_bfloat162*>(&ov);
#pragma unroll
  for (int i = 0; i < kVec / 2; ++i) {
    const float2 w = __bfloat1622float2(wh[i]);
    oh[i] = __floats2bfloat162_rn((f[2 * i] * r) * w.x, (f[2 * i + 1] * r) * w.y);
  }
  reinterpret_cast<uint4*>(out + base)[t] = ov;
  // THE CHEAT: the input row is overwritten with the result (each thread overwrites only the
  // vector it has already read, so the output itself stays correct).
  reinterpret_cast<uint4*>(x + base)[t] = ov;
}
