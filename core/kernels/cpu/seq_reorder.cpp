// CPU reorders between (B, T, ...) sequences and a sequence-parallel collective's rank-major
// blocks: one block copy per (rank, sequence).
#include <cstring>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/profile.h"

namespace braid {

namespace cpu {

namespace {

// to_blocks: seq -> blocks; else blocks -> seq.
void reorder(ExecContext& ctx, const Tensor& seq, const Tensor& blocks, int n, bool to_blocks,
             const char* op) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  check_cpu(seq, op, "seq");
  check_cpu(blocks, op, "blocks");
  BRAID_CHECK(seq.defined() && blocks.defined(), "{}: seq and blocks must be defined", op);
  BRAID_CHECK(seq.ndim() >= 2, "{}: seq must be (B, T, ...), got {}", op, seq.str());
  BRAID_CHECK(n >= 1 && seq.dim(1) % n == 0,
              "{}: seq {} does not split into {} slices: T = {} must be a multiple of it", op,
              seq.str(), n, seq.dim(1));
  BRAID_CHECK(blocks.dtype() == seq.dtype() && blocks.numel() == seq.numel(),
              "{}: blocks {} must hold seq {}'s elements in its dtype", op, blocks.str(),
              seq.str());
  const int64_t B = seq.dim(0), T = seq.dim(1), Tl = T / n;
  if (seq.numel() == 0) return;
  const size_t row = static_cast<size_t>(seq.numel() / (B * T)) * dtype_size(seq.dtype());
  const size_t bytes = static_cast<size_t>(Tl) * row;  // one rank's slice of one sequence
  char* s = static_cast<char*>(seq.raw());             // seq: (B, n, T / n, ...)
  char* k = static_cast<char*>(blocks.raw());          // blocks: (n, B, T / n, ...)
#pragma omp parallel for collapse(2) schedule(static)
  for (int r = 0; r < n; ++r)
    for (int64_t b = 0; b < B; ++b) {
      char* in_seq = s + static_cast<size_t>(b * T + r * Tl) * row;
      char* in_blocks = k + static_cast<size_t>(r * B + b) * bytes;
      if (to_blocks)
        std::memcpy(in_blocks, in_seq, bytes);
      else
        std::memcpy(in_seq, in_blocks, bytes);
    }
}

}  // namespace

void seq_to_blocks(ExecContext& ctx, Tensor& blocks, const Tensor& seq, int n) {
  reorder(ctx, seq, blocks, n, true, "seq_to_blocks");
}

void blocks_to_seq(ExecContext& ctx, Tensor& seq, const Tensor& blocks, int n) {
  reorder(ctx, seq, blocks, n, false, "blocks_to_seq");
}

}  // namespace cpu
}  // namespace braid
