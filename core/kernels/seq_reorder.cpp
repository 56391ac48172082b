// seq_reorder: argument checks and device dispatch of the public kernels
// (core/kernels/seq_reorder.h).
#include "core/kernels/seq_reorder.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void seq_to_blocks(ExecContext& ctx, Tensor& blocks, const Tensor& seq, int n) {
  KernelArgs args(ctx, "seq_to_blocks", {{&blocks, "blocks"}, {&seq, "seq"}});
  args.require_cpu();
  cpu::seq_to_blocks(ctx, blocks, seq, n);
}

void blocks_to_seq(ExecContext& ctx, Tensor& seq, const Tensor& blocks, int n) {
  KernelArgs args(ctx, "blocks_to_seq", {{&seq, "seq"}, {&blocks, "blocks"}});
  args.require_cpu();
  cpu::blocks_to_seq(ctx, seq, blocks, n);
}

}  // namespace braid
