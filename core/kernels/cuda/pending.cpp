// CUDA kernels not written yet: each fails naming the op, so a GPU run stops with a clear message
// at the first op that has no kernel instead of reaching a host loop with device pointers. An op
// leaves this list when its .cu/.cpp pair lands (core/kernels/cuda/cuda_kernels.h).
#include <iterator>

#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dropout.h"

namespace braid::cuda {

namespace {
[[noreturn]] void pending(const char* op) {
  throw UserError(
      fmt::format("no CUDA kernel for {} yet: run this configuration with "
                  "train.device: cpu",
                  op));
}
}  // namespace

// The ops below, by name: `braid train` with device: auto stays on the CPU while any is left
// (tests/unit/test_device_memory.cpp checks this list against the stubs).
constexpr const char* kPendingOps[] = {
    "gelu_forward",
    "gelu_backward",
    "swiglu_forward",
    "swiglu_backward",
    "embedding_forward",
    "embedding_backward",
    "embedding_rows_forward",
    "embedding_rows_backward",
    "layernorm_forward",
    "layernorm_backward",
    "rmsnorm_forward",
    "rmsnorm_backward",
    "rope_forward",
    "rope_backward",
    "seq_to_blocks",
    "blocks_to_seq",
    "extract_ranges",
    "insert_ranges",
    "dropout_apply",
    "quantize_blockwise",
    "dequantize_blockwise",
    "linear_forward_quantized",
    "linear_backward_input_quantized",
};

int pending_kernel_count() { return static_cast<int>(std::size(kPendingOps)); }

void gelu_forward(ExecContext&, Tensor&, const Tensor&) { pending("gelu_forward"); }
void gelu_backward(ExecContext&, Tensor&, const Tensor&, const Tensor&) {
  pending("gelu_backward");
}
void swiglu_forward(ExecContext&, Tensor&, const Tensor&, const Tensor&) {
  pending("swiglu_forward");
}
void swiglu_backward(ExecContext&, Tensor&, Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  pending("swiglu_backward");
}
void embedding_forward(ExecContext&, Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       int64_t) {
  pending("embedding_forward");
}
void embedding_backward(ExecContext&, Tensor&, Tensor&, const Tensor&, const Tensor&, int64_t) {
  pending("embedding_backward");
}
void embedding_rows_forward(ExecContext&, Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            int64_t, int64_t, int64_t) {
  pending("embedding_rows_forward");
}
void embedding_rows_backward(ExecContext&, Tensor&, Tensor&, const Tensor&, const Tensor&,
                             int64_t) {
  pending("embedding_rows_backward");
}
void layernorm_forward(ExecContext&, Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&,
                       const Tensor&, float) {
  pending("layernorm_forward");
}
void layernorm_backward(ExecContext&, Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&,
                        const Tensor&, const Tensor&, const Tensor&) {
  pending("layernorm_backward");
}
void rmsnorm_forward(ExecContext&, Tensor&, Tensor&, const Tensor&, const Tensor&, float) {
  pending("rmsnorm_forward");
}
void rmsnorm_backward(ExecContext&, Tensor&, Tensor&, const Tensor&, const Tensor&, const Tensor&,
                      const Tensor&) {
  pending("rmsnorm_backward");
}
void rope_forward(ExecContext&, Tensor&, int64_t, float) { pending("rope_forward"); }
void rope_backward(ExecContext&, Tensor&, int64_t, float) { pending("rope_backward"); }
void seq_to_blocks(ExecContext&, Tensor&, const Tensor&, int) { pending("seq_to_blocks"); }
void blocks_to_seq(ExecContext&, Tensor&, const Tensor&, int) { pending("blocks_to_seq"); }
void extract_ranges(ExecContext&, Tensor&, const Tensor&, int, const IndexRanges&) {
  pending("extract_ranges");
}
void insert_ranges(ExecContext&, Tensor&, const Tensor&, int, const IndexRanges&) {
  pending("insert_ranges");
}
void dropout_apply(ExecContext&, Tensor&, const Tensor&, float, uint64_t, uint64_t, DropoutWindow) {
  pending("dropout_apply");
}
void quantize_blockwise(ExecContext&, Tensor&, Tensor&, const Tensor&, QuantCode, int64_t) {
  pending("quantize_blockwise");
}
void dequantize_blockwise(ExecContext&, Tensor&, const Tensor&, const Tensor&, QuantCode, int64_t,
                          int64_t) {
  pending("dequantize_blockwise");
}
void linear_forward_quantized(ExecContext&, Tensor&, const Tensor&, const QuantizedWeight&,
                              const Tensor&) {
  pending("linear_forward_quantized");
}
void linear_backward_input_quantized(ExecContext&, Tensor&, const Tensor&, const QuantizedWeight&,
                                     bool) {
  pending("linear_backward_input_quantized");
}

}  // namespace braid::cuda
