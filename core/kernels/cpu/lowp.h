// The low-precision path of the CPU kernels: bf16/f16 tensors are widened into f32 workspace,
// the kernel's f32 code runs on them, and outputs are narrowed back. Arithmetic, statistics
// and accumulators are f32 as in the f32 path; only storage is 16-bit.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "core/context.h"
#include "core/kernels/cpu/convert.h"

namespace braid::cpu {

// True when any defined tensor in `ts` holds bf16 or f16: the kernel takes the staged path.
bool any_low_precision(std::initializer_list<const Tensor*> ts);

// Widened f32 stand-ins for one kernel call. Inputs and outputs that are already f32 (or
// undefined) are used as they are, so f32 parameter gradients accumulate in place.
class F32Staging {
 public:
  F32Staging(ExecContext& ctx, const char* op) : ctx_(ctx), op_(op) {}
  F32Staging(const F32Staging&) = delete;
  F32Staging& operator=(const F32Staging&) = delete;

  // An f32 copy of input t (t itself when f32 or undefined).
  Tensor in(const Tensor& t, const char* name);
  // An f32 buffer for output t (t itself when f32 or undefined), widened from t's contents
  // when `keep_contents` (accumulating or in-place outputs); narrowed into t by finish().
  Tensor out(Tensor& t, const char* name, bool keep_contents = false);
  // Narrows every staged output into its tensor (round to nearest even).
  void finish();

 private:
  ExecContext& ctx_;
  const char* op_;
  std::vector<std::pair<Tensor, Tensor>> outs_;  // (target, f32 buffer)
};

// Tile-wise conversion inside a kernel's own parallel loop: each thread widens the slice it is
// about to use into a small f32 buffer (L1/L2-resident), runs the f32 arithmetic, and narrows
// its results, so a 16-bit tensor is read and written once, in one parallel region, instead
// of being staged whole (F32Staging: a widening pass, the kernel, a narrowing pass). The
// arithmetic and the conversions are the same as staging's, so the results are the same bits.
// f32 tensors are used in place (no copy).
class TileIo {
 public:
  explicit TileIo(const ExecContext& ctx) : path_(convert_path(ctx.cpu_isa())) {}

  // Elements [off, off + n) of t (f32, bf16 or f16) as f32: t's own memory when t is f32,
  // else widened into buf (n floats).
  const float* in(const Tensor& t, int64_t off, int64_t n, float* buf) const;
  // Where the f32 results for t's elements [off, ...) go: t's own memory when t is f32, else
  // buf; store() then narrows them.
  float* out(Tensor& t, int64_t off, float* buf) const;
  // Elements [off, off + n) of t to read and overwrite in f32 (accumulating outputs): t's own
  // memory when f32, else widened into buf; store() writes them back.
  float* inout(Tensor& t, int64_t off, int64_t n, float* buf) const {
    return const_cast<float*>(in(t, off, n, buf));
  }
  // Moves n results from `res` (what out() returned, or any f32 buffer) into t[off, off + n).
  void store(Tensor& t, int64_t off, int64_t n, const float* res) const;

 private:
  ConvertIsa path_;
};

// Per-thread f32 buffers for 16-bit tiles, made inside a parallel region: `count` buffers of
// `size` floats when `need` (some operand is 16-bit), else none (every pointer null).
class TileBuffers {
 public:
  TileBuffers(ExecContext& ctx, bool need, int count, int64_t size)
      : scratch_(need ? ctx.empty({count * size}, DType::F32, MemCategory::Workspace) : Tensor()),
        size_(size) {}
  float* operator[](int i) const {
    return scratch_.defined() ? scratch_.f32() + i * size_ : nullptr;
  }

 private:
  Tensor scratch_;
  int64_t size_;
};

// Elements per task of the element-wise and activation loops over parallel_spans: large enough
// to amortise the call, small enough to balance threads. With 16-bit storage each task widens
// its operands into f32 buffers of kSpan floats: up to five of them (SwiGLU's backward) must
// stay in the core's L1 (48 KiB here), so 2048, not 8192 (whose three 32 KiB buffers went
// through L2: the bf16 element-wise and GELU groups of a training step took 1-2 ms more).
inline constexpr int64_t kSpan = 2048;

// fn(begin, len, bufs) over [0, n) in spans of `span` elements, split statically over the
// OpenMP threads (the schedule of `parallel for schedule(static)` over the spans); bufs points
// at `nbufs` per-thread f32 buffers of `span` floats each, allocated only when `need_bufs`
// (some tensor is 16-bit), else null.
template <class Fn>
void parallel_spans(ExecContext& ctx, int64_t n, int64_t span, int nbufs, bool need_bufs, Fn fn) {
#pragma omp parallel
  {
    const TileBuffers bufs(ctx, need_bufs, nbufs, span);
#pragma omp for schedule(static)
    for (int64_t s = 0; s < n; s += span) fn(s, std::min(span, n - s), bufs[0]);
  }
}

// The float dtypes the tile-wise kernels accept (f32, bf16, f16), on the host, with the op and
// name in the error.
void check_float_storage(const Tensor& t, const char* op, const char* name);
struct NamedArg {
  const Tensor* t;
  const char* name;
};
// check_float_storage for each argument.
inline void check_float_args(const char* op, std::initializer_list<NamedArg> args) {
  for (const NamedArg& a : args) check_float_storage(*a.t, op, a.name);
}

}  // namespace braid::cpu
