// f32 stand-ins for the CUDA kernels' rare mixed-dtype calls (say bf16 x with an f32 dy): the
// GEMMs take one dtype for both operands, so such a call runs on f32 copies, which is what the
// CPU kernels compute for every 16-bit call (core/kernels/cpu/lowp.h). Copies come from the
// context's allocator as workspace; casts round to nearest even.
#pragma once

#include <utility>
#include <vector>

#include "core/context.h"

namespace braid::cuda {

class F32Staging {
 public:
  explicit F32Staging(ExecContext& ctx) : ctx_(ctx) {}
  F32Staging(const F32Staging&) = delete;
  F32Staging& operator=(const F32Staging&) = delete;

  // An f32 copy of input t (t itself when f32 or undefined).
  Tensor in(const Tensor& t);
  // An f32 buffer for output t (t itself when f32 or undefined), holding t's values when
  // `keep_contents` (accumulating outputs); finish() narrows it into t.
  Tensor out(const Tensor& t, bool keep_contents = false);
  void finish();

 private:
  ExecContext& ctx_;
  std::vector<std::pair<Tensor, Tensor>> outs_;  // (target, f32 buffer)
};

}  // namespace braid::cuda
