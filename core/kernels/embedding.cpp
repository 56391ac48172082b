// embedding: argument checks and device dispatch of the public kernels (core/kernels/embedding.h).
#include "core/kernels/embedding.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void embedding_forward(ExecContext& ctx, Tensor& out, const Tensor& tokens, const Tensor& wte,
                       const Tensor& wpe, int64_t pos_offset) {
  KernelArgs args(ctx, "embedding_forward",
                  {{&out, "out"}, {&tokens, "tokens"}, {&wte, "wte"}, {&wpe, "wpe"}});
  BRAID_DISPATCH(args, embedding_forward, ctx, out, tokens, wte, wpe, pos_offset);
}

void embedding_backward(ExecContext& ctx, Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                        const Tensor& tokens, int64_t pos_offset) {
  KernelArgs args(ctx, "embedding_backward",
                  {{&dwte, "dwte"}, {&dwpe, "dwpe"}, {&dout, "dout"}, {&tokens, "tokens"}});
  BRAID_DISPATCH(args, embedding_backward, ctx, dwte, dwpe, dout, tokens, pos_offset);
}

void embedding_rows_forward(ExecContext& ctx, Tensor& out, const Tensor& tokens, const Tensor& wte,
                            const Tensor& wpe, int64_t row_begin, int64_t vocab,
                            int64_t pos_offset) {
  KernelArgs args(ctx, "embedding_rows_forward",
                  {{&out, "out"}, {&tokens, "tokens"}, {&wte, "wte"}, {&wpe, "wpe"}});
  BRAID_DISPATCH(args, embedding_rows_forward, ctx, out, tokens, wte, wpe, row_begin, vocab,
                 pos_offset);
}

void embedding_rows_backward(ExecContext& ctx, Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                             const Tensor& tokens, int64_t row_begin) {
  KernelArgs args(ctx, "embedding_rows_backward",
                  {{&dwte, "dwte"}, {&dwpe, "dwpe"}, {&dout, "dout"}, {&tokens, "tokens"}});
  BRAID_DISPATCH(args, embedding_rows_backward, ctx, dwte, dwpe, dout, tokens, row_begin);
}

}  // namespace braid
