// Softmax cross-entropy kernels.
//
// Buffer contract: logits are f32, row-major (rows, V) (the fused LM head's chunk) or (N, rows)
// (a rank's block of the vocab-parallel logits); targets (rows) i32 with -1 = ignored; per-row
// losses and statistics f32. Each row is one thread block; its reductions run in a fixed order,
// so a result depends on the data only. The fused LM head's gradient goes to a separate buffer
// in the GEMM operands' dtype, or over the logits in place when that is f32.
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/cross_entropy.h"
#include "core/kernels/math/cross_entropy.h"

namespace braid::cuda {

namespace {

constexpr int kRowThreads = 256;
constexpr unsigned kFull = 0xffffffffu;

// (m, s) summarises values x as m = max x and s = sum exp(x - m); merge folds (m2, s2) in.
// Symmetric, so the two lanes of a butterfly step agree bit for bit: each product rounded on
// its own and one commutative add (left to itself, nvcc contracts one product into an FMA,
// which rounds differently in the partner lane).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float mx = fmaxf(m, m2);
  s = __fadd_rn(__fmul_rn(s, expf(m - mx)), __fmul_rn(s2, expf(m2 - mx)));
  m = mx;
}

// Every thread of the block gets the merged (m, s); shm, shs hold one float per warp.
__device__ __forceinline__ void block_merge(float& m, float& s, float* shm, float* shs) {
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(kFull, m, o), s2 = __shfl_xor_sync(kFull, s, o);
    merge(m, s, m2, s2);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous row may still be reading shm, shs
  if (lane == 0) {
    shm[warp] = m;
    shs[warp] = s;
  }
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x >> 5);
  m = lane < warps ? shm[lane] : -INFINITY;
  s = lane < warps ? shs[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(kFull, m, o), s2 = __shfl_xor_sync(kFull, s, o);
    merge(m, s, m2, s2);
  }
}

// One block per row: the online max and sum of exponentials in one pass over the logits, the
// loss, then (when grad is not null) the gradient in a second pass. grad may alias logits.
template <typename G>
__global__ void xent_rows_kernel(const float* logits, G* grad, float* losses,
                                 const int32_t* targets, int64_t rows, int64_t V,
                                 float grad_scale) {
  __shared__ float shm[32], shs[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + r * V;
    G* grow = grad ? grad + r * V : nullptr;
    const int32_t target = targets[r];
    if (target < 0) {  // ignored: no loss, no gradient
      if (threadIdx.x == 0) losses[r] = 0.0f;
      if (grow)
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x) store_f32(grow, j, 0.0f);
      continue;
    }
    const float target_logit = row[target];  // read before any thread overwrites the row
    float m = -INFINITY, s = 0.0f;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
      const float x = row[j];
      if (x > m) {
        s = s * expf(m - x) + 1.0f;
        m = x;
      } else if (x != -INFINITY) {
        s += expf(x - m);  // a NaN logit makes s NaN, and the loss with it
      }
    }
    block_merge(m, s, shm, shs);
    if (threadIdx.x == 0) losses[r] = math::softmax_xent_loss(s, m, target_logit);
    if (!grow) continue;
    const float inv = grad_scale / s;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
      store_f32(grow, j, math::softmax_xent_grad(expf(row[j] - m), inv, j == target, grad_scale));
  }
}

// One block: the smallest index of a target outside [-1, limit) (n when none), and the target.
__global__ void find_bad_target_kernel(int64_t* bad, const int32_t* targets, int64_t n,
                                       int64_t limit) {
  __shared__ long long sh[32];
  long long first = n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (targets[i] < -1 || targets[i] >= limit) {
      first = i;  // the thread's indices increase, so its first is its smallest
      break;
    }
  for (int o = 16; o > 0; o >>= 1) {
    const long long other = __shfl_xor_sync(kFull, first, o);
    first = other < first ? other : first;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh[warp] = first;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w)
      first = sh[w] < first ? sh[w] : first;
    bad[0] = first;
    bad[1] = first < n ? targets[first] : 0;
  }
}

// One block: each thread sums its fixed stride of rows in double, then the warps' sums are
// added in warp order.
__global__ void loss_sum_kernel(double* out, const float* losses, const int32_t* targets,
                                int64_t n) {
  __shared__ double sh_sum[32], sh_count[32];
  double sum = 0.0, count = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (targets[i] >= 0) {
      sum += losses[i];
      count += 1.0;
    }
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_xor_sync(kFull, sum, o);
    count += __shfl_xor_sync(kFull, count, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sh_sum[warp] = sum;
    sh_count[warp] = count;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0, c = 0.0;
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) {
      s += sh_sum[w];
      c += sh_count[w];
    }
    out[0] = s;
    out[1] = c;
  }
}

// ---- vocab-parallel steps: one block per row of the (N, rows) block ----

__global__ void vocab_slice_partials_kernel(float* row_max, float* target_logit,
                                            const float* logits, const int32_t* targets, int64_t N,
                                            int64_t rows, int64_t real, int64_t row_begin) {
  __shared__ float sh[32];
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const float* lg = logits + i * rows;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < real; j += blockDim.x) m = fmaxf(m, lg[j]);
    m = block_max(m, sh);
    if (threadIdx.x == 0) {
      row_max[i] = m;
      const int64_t local = static_cast<int64_t>(targets[i]) - row_begin;
      target_logit[i] = targets[i] >= 0 && local >= 0 && local < real ? lg[local] : 0.0f;
    }
  }
}

__global__ void vocab_slice_exp_kernel(float* logits, float* sum_exp, const float* row_max,
                                       int64_t N, int64_t rows, int64_t real) {
  __shared__ float sh[32];
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    float* lg = logits + i * rows;
    const float m = row_max[i];
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < real; j += blockDim.x) {
      const float e = expf(lg[j] - m);
      lg[j] = e;
      s += e;
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) sum_exp[i] = s;
  }
}

__global__ void vocab_slice_losses_kernel(float* losses, const float* sum_exp, const float* row_max,
                                          const float* target_logit, const int32_t* targets,
                                          int64_t N) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < N;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    losses[i] =
        targets[i] < 0 ? 0.0f : math::softmax_xent_loss(sum_exp[i], row_max[i], target_logit[i]);
}

__global__ void vocab_slice_grad_kernel(float* logits, const float* sum_exp, const int32_t* targets,
                                        int64_t N, int64_t rows, int64_t real, int64_t row_begin,
                                        float grad_scale) {
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    float* lg = logits + i * rows;
    const int32_t t = targets[i];
    const float inv = t < 0 ? 0.0f : grad_scale / sum_exp[i];
    const int64_t local = t >= 0 ? static_cast<int64_t>(t) - row_begin : -1;
    for (int64_t j = threadIdx.x; j < rows; j += blockDim.x)
      lg[j] = j < real ? math::softmax_xent_grad(lg[j], inv, j == local, grad_scale) : 0.0f;
  }
}

}  // namespace

int64_t lm_head_chunk_rows(int64_t n, int64_t vocab) {
  constexpr int64_t kScratchFloats = int64_t{1} << 26;  // 256 MiB of f32 logits
  const int64_t rows = kScratchFloats / (vocab > 0 ? vocab : 1);
  return rows < 1 ? 1 : (rows < n ? rows : n);
}

void launch_find_bad_target(void* stream, int64_t* bad, const int32_t* targets, int64_t n,
                            int64_t limit) {
  find_bad_target_kernel<<<1, 1024, 0, as_stream(stream)>>>(bad, targets, n, limit);
}

void launch_xent_rows(void* stream, float* logits, void* grad, int tgrad, float* losses,
                      const int32_t* targets, int64_t rows, int64_t V, float grad_scale) {
  if (rows == 0) return;
  const unsigned blocks = row_blocks(rows);
  if (!grad) {
    xent_rows_kernel<float><<<blocks, kRowThreads, 0, as_stream(stream)>>>(
        logits, nullptr, losses, targets, rows, V, grad_scale);
    return;
  }
  with_float_type(tgrad, [&]<typename G>() {
    xent_rows_kernel<G><<<blocks, kRowThreads, 0, as_stream(stream)>>>(
        logits, static_cast<G*>(grad), losses, targets, rows, V, grad_scale);
  });
}

void launch_loss_sum(void* stream, double* out, const float* losses, const int32_t* targets,
                     int64_t n) {
  loss_sum_kernel<<<1, 1024, 0, as_stream(stream)>>>(out, losses, targets, n);
}

void launch_vocab_slice_partials(void* stream, float* row_max, float* target_logit,
                                 const float* logits, const int32_t* targets, int64_t N,
                                 int64_t rows, int64_t real, int64_t row_begin) {
  if (N == 0) return;
  vocab_slice_partials_kernel<<<row_blocks(N), kRowThreads, 0, as_stream(stream)>>>(
      row_max, target_logit, logits, targets, N, rows, real, row_begin);
}

void launch_vocab_slice_exp(void* stream, float* logits, float* sum_exp, const float* row_max,
                            int64_t N, int64_t rows, int64_t real) {
  if (N == 0) return;
  vocab_slice_exp_kernel<<<row_blocks(N), kRowThreads, 0, as_stream(stream)>>>(
      logits, sum_exp, row_max, N, rows, real);
}

void launch_vocab_slice_losses(void* stream, float* losses, const float* sum_exp,
                               const float* row_max, const float* target_logit,
                               const int32_t* targets, int64_t N) {
  if (N == 0) return;
  vocab_slice_losses_kernel<<<grid_for(N, kRowThreads), kRowThreads, 0, as_stream(stream)>>>(
      losses, sum_exp, row_max, target_logit, targets, N);
}

void launch_vocab_slice_grad(void* stream, float* logits, const float* sum_exp,
                             const int32_t* targets, int64_t N, int64_t rows, int64_t real,
                             int64_t row_begin, float grad_scale) {
  if (N == 0) return;
  vocab_slice_grad_kernel<<<row_blocks(N), kRowThreads, 0, as_stream(stream)>>>(
      logits, sum_exp, targets, N, rows, real, row_begin, grad_scale);
}

}  // namespace braid::cuda
