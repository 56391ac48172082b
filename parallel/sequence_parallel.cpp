// Sequence-parallel all-gather and reduce-scatter over the sequence dimension.
#include "parallel/sequence_parallel.h"

#include <cstring>

#include "core/kernels/elementwise.h"

namespace braid {

namespace {

// A communicator's blocks are contiguous, rank after rank: (n, B, T / n, C). The model's
// layout is (B, T, C) = (B, n, T / n, C). Copies `seq`'s slices between the two (to_blocks:
// seq -> blocks; else blocks -> seq); a no-op layout for B = 1, which the callers skip.
void reorder(const Tensor& seq, const Tensor& blocks, int n, bool to_blocks) {
  const int64_t B = seq.dim(0), T = seq.dim(1), Tl = T / n;
  const size_t row = static_cast<size_t>(seq.numel() / (B * T)) * dtype_size(seq.dtype());
  char* s = static_cast<char*>(seq.raw());
  char* k = static_cast<char*>(blocks.raw());
  for (int r = 0; r < n; ++r)
    for (int64_t b = 0; b < B; ++b) {
      char* in_seq = s + (b * T + r * Tl) * row;
      char* in_blocks = k + (r * B + b) * Tl * row;
      if (to_blocks)
        std::memcpy(in_blocks, in_seq, Tl * row);
      else
        std::memcpy(in_seq, in_blocks, Tl * row);
    }
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
  reorder(out, blocks, n, false);
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
      reorder(partial, blocks, n, true);
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
