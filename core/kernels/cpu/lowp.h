// The low-precision path of the CPU kernels: bf16/f16 tensors are widened into f32 workspace,
// the kernel's f32 code runs on them, and outputs are narrowed back. Arithmetic, statistics
// and accumulators are f32 as in the f32 path; only storage is 16-bit.
#pragma once

#include <initializer_list>
#include <vector>

#include "core/context.h"

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

}  // namespace braid::cpu
