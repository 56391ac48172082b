// optimizer: argument checks and device dispatch of the public kernels (core/kernels/optimizer.h).
#include "core/kernels/optimizer.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/math/adamw8bit.h"

namespace braid {

void adamw_update(ExecContext& ctx, Tensor& w, Tensor& m, Tensor& v, const Tensor& g,
                  const AdamWStep& s, Tensor* rounded) {
  const Tensor none;
  KernelArgs args(
      ctx, "adamw_update",
      {{&w, "w"}, {&m, "m"}, {&v, "v"}, {&g, "g"}, {rounded ? rounded : &none, "rounded"}});
  BRAID_DISPATCH(args, adamw_update, ctx, w, m, v, g, s, rounded);
}

void adamw8bit_update(ExecContext& ctx, Tensor& w, Tensor& m_codes, Tensor& m_absmax,
                      Tensor& v_codes, Tensor& v_absmax, const Tensor& g, const AdamWStep& s) {
  KernelArgs args(ctx, "adamw8bit_update",
                  {{&w, "w"},
                   {&m_codes, "m_codes"},
                   {&m_absmax, "m_absmax"},
                   {&v_codes, "v_codes"},
                   {&v_absmax, "v_absmax"},
                   {&g, "g"}});
  BRAID_DISPATCH(args, adamw8bit_update, ctx, w, m_codes, m_absmax, v_codes, v_absmax, g, s);
}

int64_t adamw8bit_blocks(int64_t n) {
  return (n + math::kAdam8bitBlock - 1) / math::kAdam8bitBlock;
}

}  // namespace braid
