// CPU copies between a whole tensor and its ranges along one dimension (tensor-parallel shards):
// one block copy per (index of the leading dimensions, range).
#include <cstring>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/profile.h"

namespace braid {

namespace cpu {

namespace {

// to_part: whole -> part; else part -> whole.
void copy_ranges(ExecContext& ctx, const Tensor& whole, const Tensor& part, int dim,
                 const IndexRanges& ranges, bool to_part, const char* op) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  check_cpu(whole, op, "whole");
  check_cpu(part, op, "part");
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
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    int64_t at = 0;  // where the range starts in part
    for (auto [b, e] : ranges) {
      const size_t bytes = static_cast<size_t>((e - b) * inner) * es;
      char* wp = w + static_cast<size_t>((o * whole_d + b) * inner) * es;
      char* pp = p + static_cast<size_t>((o * part_d + at) * inner) * es;
      if (to_part)
        std::memcpy(pp, wp, bytes);
      else
        std::memcpy(wp, pp, bytes);
      at += e - b;
    }
  }
}

}  // namespace

void extract_ranges(ExecContext& ctx, Tensor& part, const Tensor& whole, int dim,
                    const IndexRanges& ranges) {
  copy_ranges(ctx, whole, part, dim, ranges, true, "extract_ranges");
}

void insert_ranges(ExecContext& ctx, Tensor& whole, const Tensor& part, int dim,
                   const IndexRanges& ranges) {
  copy_ranges(ctx, whole, part, dim, ranges, false, "insert_ranges");
}

}  // namespace cpu
}  // namespace braid
