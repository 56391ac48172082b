// Sequence-parallel all-gather and reduce-scatter over the sequence dimension.
#include "parallel/sequence_parallel.h"

#include <cstring>

#include "core/kernels/elementwise.h"

namespace braid {

namespace {

// A communicator's blocks are contiguous, rank after rank: (n, B, T / n, C). The model's
// layout is (B, T, C) = (B, n, T / n, C). Copies between the two (a no-op layout for B = 1).
void blocks_to_sequences(const Tensor& blocks, Tensor& seq, int n) {
  const int64_t B = seq.dim(0), T = seq.dim(1), Tl = T / n;
  const size_t row = static_cast<size_t>(seq.numel() / (B * T)) * dtype_size(seq.dtype());
  const char* src = static_cast<const char*>(blocks.raw());
  char* dst = static_cast<char*>(seq.raw());
  for (int r = 0; r < n; ++r)
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(dst + (b * T + r * Tl) * row, src + (r * B + b) * Tl * row, Tl * row);
}

void sequences_to_blocks(const Tensor& seq, Tensor& blocks, int n) {
  const int64_t B = seq.dim(0), T = seq.dim(1), Tl = T / n;
  const size_t row = static_cast<size_t>(seq.numel() / (B * T)) * dtype_size(seq.dtype());
  const char* src = static_cast<const char*>(seq.raw());
  char* dst = static_cast<char*>(blocks.raw());
  for (int r = 0; r < n; ++r)
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(dst + (r * B + b) * Tl * row, src + (b * T + r * Tl) * row, Tl * row);
}

}  // namespace

Tensor seq_all_gather(ExecContext& ctx, Communicator& tp, const Tensor& x) {
  const int n = tp.size();
  BRAID_CHECK(x.ndim() == 3, "seq_all_gather of {}: expected (B, T / tp, C)", x.str());
  if (n == 1) return x;
  Shape whole = x.shape();
  whole[1] *= n;
  Tensor blocks = ctx.empty({n * x.numel()}, x.dtype());
  tp.all_gather(x.view({x.numel()}), blocks).wait();
  if (x.dim(0) == 1) return blocks.view(whole);
  Tensor out = ctx.empty(whole, x.dtype());
  blocks_to_sequences(blocks, out, n);
  return out;
}

Tensor seq_reduce_scatter(ExecContext& ctx, Communicator& tp, const Tensor& partial,
                          DType out_dtype) {
  const int n = tp.size();
  BRAID_CHECK(partial.ndim() == 3 && partial.dim(1) % n == 0,
              "seq_reduce_scatter of {}: expected (B, T, C) with T divisible by {}", partial.str(),
              n);
  Shape local = partial.shape();
  local[1] /= n;
  Tensor sum;
  if (n == 1) {
    sum = partial;
  } else {
    Tensor blocks = partial;
    if (partial.dim(0) > 1) {
      blocks = ctx.empty(partial.shape(), partial.dtype());
      sequences_to_blocks(partial, blocks, n);
    }
    sum = ctx.empty(local, partial.dtype());
    tp.reduce_scatter(blocks.view({partial.numel()}), sum.view({sum.numel()}), ReduceOp::Sum)
        .wait();
  }
  if (sum.dtype() == out_dtype) return sum;
  Tensor out = ctx.empty(local, out_dtype);
  cast(ctx, out, sum);
  return out;
}

}  // namespace braid
