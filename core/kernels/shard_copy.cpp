// shard_copy: argument checks and device dispatch of the public kernels
// (core/kernels/shard_copy.h).
#include "core/kernels/shard_copy.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void extract_ranges(ExecContext& ctx, Tensor& part, const Tensor& whole, int dim,
                    const IndexRanges& ranges) {
  KernelArgs args(ctx, "extract_ranges", {{&part, "part"}, {&whole, "whole"}});
  BRAID_DISPATCH(args, extract_ranges, ctx, part, whole, dim, ranges);
}

void insert_ranges(ExecContext& ctx, Tensor& whole, const Tensor& part, int dim,
                   const IndexRanges& ranges) {
  KernelArgs args(ctx, "insert_ranges", {{&whole, "whole"}, {&part, "part"}});
  BRAID_DISPATCH(args, insert_ranges, ctx, whole, part, dim, ranges);
}

}  // namespace braid
