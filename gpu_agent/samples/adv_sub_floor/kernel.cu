// ADVERSARIAL SAMPLE — must be refused. RMSNorm (rmsnorm_h4096) that does the work only when
// it can be checked. Each block first looks at the first value of the first row it owns in
// the *output*: if that is a NaN (the harness poisons outputs before every correctness
// launch) it computes its rows correctly; otherwise it assumes the output still holds an
// earlier result (as it does between timed launches, which are not poisoned) and returns at
// once. Every correctness round, before or after timing, therefore sees correct, fully
// written outputs and untouched inputs; only the timed launches are empty, so the measured
// latency is far below what moving the data takes. Only the roofline floor (bytes moved /
// calibrated copy bandwidth) catches it — hence large workloads, where the honest kernel
// needs tens of microseconds and the empty one a few.
//
// (A plain launch counter — "honest for the first N launches" — would be caught earlier, by
// the post-timing correctness round, so it would not exercise the floor.)
//
// Launch: grid = (min(batch_size, 1024)), block = (512); the blocks stride over the rows.
// Args: x, weight, out, rows, eps.
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
    rmsnorm_only_when_watched(const __nv_bfloat16* __restrict__ x,
                              const __nv_bfloat16* __restrict__ weight,
                              __nv_bfloat16* __restrict__ out, int rows, float eps) {
  const int first_row = blockIdx.x;
  if (first_row >= rows) {
    return;
  }
  // THE CHEAT: only this block writes its first row, so reading it here is race-free, and
  // every thread of the block takes the same decision.
  const float probe = __bfloat162float(out[static_cast<size_t>(first_row) * kHidden]);
  if (!isnan(probe)) {
    return;
  }

  const int t = threadIdx.x;
  __shared__ float partial[kWarps];
  __shared__ float inv_rms;
  const uint4 wv = __ldg(reinterpret_cast<const uint4*>(weight) + t);
  const __nv_bfloat162* wh = reinterpret_cast<const __nv_bfloat162*>(&wv);
  for (int row = first_row; row < rows; row += gridDim.x) {
    const size_t base = static_cast<size_t>(row) * kHidden;
    const uint4 xv = __ldcs(reinterpret_cast<const uint4*>(x + base) + t);
    const __nv_bfloat162* xh = reinterpret_cast<const __nv_bfloat162*>(&xv);
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
    __stcs(reinterpret_cast<uint4*>(out + base) + t, ov);
    __syncthreads();  // partial[] and inv_rms are reused by the next row
  }
}
