// seq_reorder: argument checks and device dispatch of the public kernels
// (core/kernels/seq_reorder.h).
#include "core/kernels/seq_reorder.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void seq_to_blocks(ExecContext& ctx, Tensor& blocks, const Tensor& seq, int n) {
  KernelArgs args(ctx, "seq_to_blocks", {{&blocks, "blocks"}, {&seq, "seq"}});
  BRAID_DISPATCH(args, seq_to_blocks, ctx, blocks, seq, n);
}

void blocks_to_seq(ExecContext& ctx, Tensor& seq, const Tensor& blocks, int n) {
  KernelArgs args(ctx, "blocks_to_seq", {{&seq, "seq"}, {&blocks, "blocks"}});
  BRAID_DISPATCH(args, blocks_to_seq, ctx, seq, blocks, n);
}

}  // namespace braid
