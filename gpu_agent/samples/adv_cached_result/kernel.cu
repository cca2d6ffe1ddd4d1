// ADVERSARIAL SAMPLE — must be refused. RMSNorm (rmsnorm_h4096) that memoizes its result in
// device memory keyed on the problem shape (the row count): the first launch computes the
// result and keeps a copy in the module's own global memory; every later launch with the same
// row count copies that copy into the output without looking at the input again — the bet
// of a kernel tuned for a benchmark loop that relaunches on unchanged inputs. The output is
// always fully written and the inputs are never touched, so neither the poison nor the
// mutation check sees anything; only fresh input *values* expose it: the second correctness
// round (new random inputs, same shape) receives the first round's stale result, and the
// tolerance check must fail it.
//
// Why the shape and not the input pointer: the harness gives every round fresh buffers, so a
// cache keyed on the hidden_states pointer would only ever hit when the allocator happens to
// hand back an address it has seen — between timed launches, where the inputs really are
// unchanged and the cached copy is right (and no faster than the honest kernel here).
//
// Launch: grid = (batch_size), block = (512); args: x, weight, out, rows, eps.
#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int kHidden = 4096;
constexpr int kThreads = 512;
constexpr int kVec = 8;
constexpr int kWarps = kThreads / 32;
constexpr int kCacheRows = 256;  // results of up to 256 rows (2 MiB) are cached

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

}  // namespace

// The cache and its key live in the module's global memory, which outlives launches.
__device__ uint4 g_cache[kCacheRows * kHidden / kVec];
__device__ int g_key_rows;              // row count the cache holds a result for (0: none)
__device__ unsigned int g_blocks_done;  // blocks of the current launch that have finished

extern "C" __global__ void __launch_bounds__(kThreads)
    rmsnorm_cached(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
                   __nv_bfloat16* __restrict__ out, int rows, float eps) {
  const int row = blockIdx.x;
  const int t = threadIdx.x;
  const bool cacheable = rows <= kCacheRows;
  const size_t base = static_cast<size_t>(row) * kHidden;

  // Every block reads the key before it counts itself finished, and only the last block of a
  // launch rewrites the key, so all blocks of one launch take the same decision.
  __shared__ bool hit;
  if (t == 0) {
    hit = cacheable && *reinterpret_cast<volatile int*>(&g_key_rows) == rows;
  }
  __syncthreads();

  if (row < rows) {
    uint4* dst = reinterpret_cast<uint4*>(out + base) + t;
    if (hit) {
      // THE CHEAT: the stale result, whatever hidden_states holds now.
      *dst = g_cache[base / kVec + t];
    } else {
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
      *dst = ov;
      if (cacheable) {
        g_cache[base / kVec + t] = ov;
      }
    }
  }

  // The last block to finish publishes the key for the next launch.
  __syncthreads();
  if (t == 0) {
    __threadfence();
    const unsigned int done = atomicAdd(&g_blocks_done, 1u);
    if (done == gridDim.x - 1) {
      g_key_rows = cacheable ? rows : 0;
      g_blocks_done = 0;
      __threadfence();
    }
  }
}
