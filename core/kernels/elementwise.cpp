// elementwise: argument checks and device dispatch of the public kernels
// (core/kernels/elementwise.h).
#include "core/kernels/elementwise.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void add(ExecContext& ctx, Tensor& y, const Tensor& a, const Tensor& b) {
  KernelArgs args(ctx, "add", {{&y, "y"}, {&a, "a"}, {&b, "b"}});
  BRAID_DISPATCH(args, add, ctx, y, a, b);
}

void add_inplace(ExecContext& ctx, Tensor& y, const Tensor& x) {
  KernelArgs args(ctx, "add_inplace", {{&y, "y"}, {&x, "x"}});
  BRAID_DISPATCH(args, add_inplace, ctx, y, x);
}

void zero(ExecContext& ctx, Tensor& x) {
  KernelArgs args(ctx, "zero", {{&x, "x"}});
  BRAID_DISPATCH(args, zero, ctx, x);
}

void scale_inplace(ExecContext& ctx, Tensor& x, float s) {
  KernelArgs args(ctx, "scale_inplace", {{&x, "x"}});
  BRAID_DISPATCH(args, scale_inplace, ctx, x, s);
}

double sum_squares(ExecContext& ctx, const Tensor& x) {
  KernelArgs args(ctx, "sum_squares", {{&x, "x"}});
  return BRAID_DISPATCH(args, sum_squares, ctx, x);
}

std::vector<double> sum_squares_each(ExecContext& ctx, const std::vector<Tensor>& xs) {
  KernelArgs args(ctx, "sum_squares_each", {});
  std::vector<const Tensor*> ptrs;
  for (const Tensor& x : xs) {
    BRAID_CHECK(x.defined(), "sum_squares_each: tensor {} of {} is undefined", ptrs.size(),
                xs.size());
    ptrs.push_back(&x);
  }
  args.add_all(ptrs, "xs");
  return BRAID_DISPATCH(args, sum_squares_each, ctx, xs);
}

void cast(ExecContext& ctx, Tensor& dst, const Tensor& src) {
  KernelArgs args(ctx, "cast", {{&dst, "dst"}, {&src, "src"}});
  BRAID_DISPATCH(args, cast, ctx, dst, src);
}

void split_columns(ExecContext& ctx, const std::vector<Tensor*>& parts, const Tensor& src) {
  KernelArgs args(ctx, "split_columns", {{&src, "src"}});
  args.add_all(parts, "parts");
  BRAID_DISPATCH(args, split_columns, ctx, parts, src);
}

void concat_columns(ExecContext& ctx, Tensor& dst, const std::vector<const Tensor*>& parts) {
  KernelArgs args(ctx, "concat_columns", {{&dst, "dst"}});
  args.add_all(parts, "parts");
  BRAID_DISPATCH(args, concat_columns, ctx, dst, parts);
}

void copy_rows(ExecContext& ctx, Tensor& dst, int64_t row, const Tensor& src) {
  KernelArgs args(ctx, "copy_rows", {{&dst, "dst"}, {&src, "src"}});
  BRAID_DISPATCH(args, copy_rows, ctx, dst, row, src);
}

}  // namespace braid
