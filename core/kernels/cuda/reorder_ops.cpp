// CUDA copies between tensor layouts of the parallel code: the sequence-parallel reorders
// (core/kernels/seq_reorder.h) and the shard copies (core/kernels/shard_copy.h). Each is a few
// strided 2-D copies on the context's stream (cudaMemcpy2DAsync), with the CPU kernels' checks.
#include <cuda_runtime.h>

#include <climits>

#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/profile.h"

namespace braid::cuda {

namespace {

// `height` blocks of `width` bytes, src and dst `*_pitch` bytes apart. A single block is one
// plain copy; a pitch beyond what cudaMemcpy2D takes falls back to one copy per block.
void copy_blocks(ExecContext& ctx, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                 size_t width, size_t height) {
  if (width == 0 || height == 0) return;
  const auto s = static_cast<cudaStream_t>(stream_of(ctx));
  if (height == 1 || (dst_pitch == width && src_pitch == width)) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, width * height, cudaMemcpyDeviceToDevice, s));
  } else if (dst_pitch <= INT_MAX && src_pitch <= INT_MAX) {
    CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height,
                                 cudaMemcpyDeviceToDevice, s));
  } else {
    for (size_t h = 0; h < height; ++h)
      CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + h * dst_pitch,
                                 static_cast<const char*>(src) + h * src_pitch, width,
                                 cudaMemcpyDeviceToDevice, s));
  }
}

// to_blocks: seq -> blocks; else blocks -> seq. Per rank r, the B slices of T / n rows.
void reorder(ExecContext& ctx, const Tensor& seq, const Tensor& blocks, int n, bool to_blocks,
             const char* op) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
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
  const size_t seq_pitch = static_cast<size_t>(T) * row;
  for (int r = 0; r < n; ++r) {
    char* in_seq = s + static_cast<size_t>(r) * bytes;
    char* in_blocks = k + static_cast<size_t>(r) * static_cast<size_t>(B) * bytes;
    if (to_blocks)
      copy_blocks(ctx, in_blocks, bytes, in_seq, seq_pitch, bytes, static_cast<size_t>(B));
    else
      copy_blocks(ctx, in_seq, seq_pitch, in_blocks, bytes, bytes, static_cast<size_t>(B));
  }
}

// to_part: whole -> part; else part -> whole. Per range, one strided copy over the leading
// dimensions.
void copy_ranges(ExecContext& ctx, const Tensor& whole, const Tensor& part, int dim,
                 const IndexRanges& ranges, bool to_part, const char* op) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  BRAID_CHECK(whole.defined() && part.defined(), "{}: whole and part must be defined", op);
  BRAID_CHECK(part.dtype() == whole.dtype(), "{}: part {} and whole {} differ in dtype", op,
              part.str(), whole.str());
  const Shape& g = whole.shape();
  BRAID_CHECK(dim >= 0 && dim < static_cast<int>(g.size()), "{}: dim {} of whole {}", op, dim,
              whole.str());
  const int64_t whole_d = g[static_cast<size_t>(dim)];
  int64_t part_d = 0;
  for (auto [b, e] : ranges) {
    BRAID_CHECK(0 <= b && b <= e && e <= whole_d,
                "{}: range [{}, {}) is outside [0, {}) along dim {} of whole {}", op, b, e, whole_d,
                dim, whole.str());
    part_d += e - b;
  }
  Shape local = g;
  local[static_cast<size_t>(dim)] = part_d;
  check_shape(part, local, op);
  const size_t es = dtype_size(whole.dtype());
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= g[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(dim) + 1; i < g.size(); ++i) inner *= g[i];
  if (whole.numel() == 0 || part_d == 0) return;
  char* w = static_cast<char*>(whole.raw());  // whole: (outer, whole_d, inner)
  char* p = static_cast<char*>(part.raw());   // part: (outer, part_d, inner)
  const size_t whole_pitch = static_cast<size_t>(whole_d * inner) * es;
  const size_t part_pitch = static_cast<size_t>(part_d * inner) * es;
  int64_t at = 0;  // where the range starts in part
  for (auto [b, e] : ranges) {
    const size_t width = static_cast<size_t>((e - b) * inner) * es;
    char* wp = w + static_cast<size_t>(b * inner) * es;
    char* pp = p + static_cast<size_t>(at * inner) * es;
    if (to_part)
      copy_blocks(ctx, pp, part_pitch, wp, whole_pitch, width, static_cast<size_t>(outer));
    else
      copy_blocks(ctx, wp, whole_pitch, pp, part_pitch, width, static_cast<size_t>(outer));
    at += e - b;
  }
}

}  // namespace

void seq_to_blocks(ExecContext& ctx, Tensor& blocks, const Tensor& seq, int n) {
  reorder(ctx, seq, blocks, n, true, "seq_to_blocks");
}

void blocks_to_seq(ExecContext& ctx, Tensor& seq, const Tensor& blocks, int n) {
  reorder(ctx, seq, blocks, n, false, "blocks_to_seq");
}

void extract_ranges(ExecContext& ctx, Tensor& part, const Tensor& whole, int dim,
                    const IndexRanges& ranges) {
  copy_ranges(ctx, whole, part, dim, ranges, true, "extract_ranges");
}

void insert_ranges(ExecContext& ctx, Tensor& whole, const Tensor& part, int dim,
                   const IndexRanges& ranges) {
  copy_ranges(ctx, whole, part, dim, ranges, false, "insert_ranges");
}

}  // namespace braid::cuda
