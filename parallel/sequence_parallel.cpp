// Sequence-parallel all-gather and reduce-scatter over the sequence dimension.
#include "parallel/sequence_parallel.h"

#include "core/kernels/elementwise.h"
#include "core/kernels/seq_reorder.h"
#include "parallel/comm_streams.h"

namespace braid {

Tensor seq_all_gather(ExecContext& ctx, Communicator& tp, const Tensor& x) {
  const int n = tp.size();
  BRAID_CHECK(x.ndim() == 3, "seq_all_gather of {}: expected (B, T / tp, C)", x.str());
  if (n == 1) return x;
  Shape whole = x.shape();
  whole[1] *= n;
  Tensor blocks = ctx.empty({n * x.numel()}, x.dtype());
  wait_in_stream(ctx, tp.all_gather(x.view({x.numel()}), blocks));
  if (x.dim(0) == 1) return blocks.view(whole);
  Tensor out = ctx.empty(whole, x.dtype());
  blocks_to_seq(ctx, out, blocks, n);
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
      seq_to_blocks(ctx, blocks, partial, n);
    }
    sum = ctx.empty(local, partial.dtype());
    wait_in_stream(ctx, tp.reduce_scatter(blocks.view({partial.numel()}), sum.view({sum.numel()}),
                                          ReduceOp::Sum));
  }
  if (sum.dtype() == out_dtype) return sum;
  Tensor out = ctx.empty(local, out_dtype);
  cast(ctx, out, sum);
  return out;
}

}  // namespace braid
