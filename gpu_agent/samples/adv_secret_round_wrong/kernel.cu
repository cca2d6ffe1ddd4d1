// ADVERSARIAL SAMPLE — must be refused. RMSNorm (rmsnorm_h4096) that is right only on inputs
// it has seen: it carries the first four hidden_states values of every *public* correctness
// round of the samples' job (SAMPLE_JOB_ID in gpu_agent/samples; public seeds derive from
// the job id and the workload, so anyone holding the job can regenerate those inputs, see
// gpu_agent/inputs.py), and on any other input it returns a result 12.5 % too large,
// standing in for whatever shortcut a kernel tuned against known inputs takes. The public
// rounds pass (outputs fully written, inputs untouched, values exact); the round seeded from
// the job's secret nonce, and the post-timing round, fail the tolerance check. Round order is
// shuffled by the nonce, so the kernel could not have told the secret round by counting
// launches either.
//
// Launch: grid = (batch_size), block = (512); args: x, weight, out, rows, eps.
#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int kHidden = 4096;
constexpr int kThreads = 512;
constexpr int kVec = 8;
constexpr int kWarps = kThreads / 32;

// BEGIN PUBLIC FINGERPRINTS (python -m gpu_agent.samples sync)
// Job 985ab66c-f377-56c8-b4c1-572e0887702f: first 4 hidden_states values per public round.
constexpr int kKnown = 4;
__constant__ uint2 kPublicInputs[kKnown] = {
    {0x3fb23eceu, 0x3f3d3fa6u},  // workload cab0eaeb-8d4b-52bd-8e58-672f0eb10daa, public-0
    {0x3f60bf87u, 0x3f65bf28u},  // workload cab0eaeb-8d4b-52bd-8e58-672f0eb10daa, public-1
    {0x3fbdbed0u, 0xbe203f89u},  // workload e8408698-147e-5d2c-918e-4ba080ee8b59, public-0
    {0xbefbbf3cu, 0xbf333e7au},  // workload e8408698-147e-5d2c-918e-4ba080ee8b59, public-1
};
// END PUBLIC FINGERPRINTS

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    rmsnorm_public_rounds_only(const __nv_bfloat16* __restrict__ x,
                               const __nv_bfloat16* __restrict__ weight,
                               __nv_bfloat16* __restrict__ out, int rows, float eps) {
  const int row = blockIdx.x;
  if (row >= rows) {
    return;
  }
  const int t = threadIdx.x;

  // THE CHEAT: recognise a public round by the first values of the input.
  const uint2 head = __ldg(reinterpret_cast<const uint2*>(x));
  bool known = false;
#pragma unroll
  for (int i = 0; i < kKnown; ++i) {
    known |= head.x == kPublicInputs[i].x && head.y == kPublicInputs[i].y;
  }
  const float skew = known ? 1.0f : 1.125f;

  const size_t base = static_cast<size_t>(row) * kHidden;
  const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x + base) + t);
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
      inv_rms = rsqrtf(v / static_cast<float>(kHidden) + eps) * skew;
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
}
