// CUDA optimizer updates (core/kernels/optimizer.h) on the context's stream.
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/kernels/cuda/optimizer.h"
#include "core/profile.h"

namespace braid::cuda {

void adamw_update(ExecContext& ctx, Tensor& w, Tensor& m, Tensor& v, const Tensor& g,
                  const AdamWStep& s, Tensor* rounded) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Optimizer);
  const char* op = "adamw_update";
  for (auto [t, name] :
       {std::pair<const Tensor*, const char*>{&w, "w"}, {&m, "m"}, {&v, "v"}, {&g, "g"}}) {
    BRAID_CHECK(t->defined() && t->dtype() == DType::F32, "{}: {} is {}; expected f32", op, name,
                t->defined() ? t->str() : std::string("undefined"));
  }
  check_shape(m, w.shape(), "adamw_update m");
  check_shape(v, w.shape(), "adamw_update v");
  check_shape(g, w.shape(), "adamw_update g");
  if (rounded)
    BRAID_CHECK(rounded->defined() &&
                    (rounded->dtype() == DType::BF16 || rounded->dtype() == DType::F16) &&
                    rounded->numel() == w.numel(),
                "{}: rounded is {}; expected bf16 or f16 with {} elements", op,
                rounded->defined() ? rounded->str() : std::string("undefined"), w.numel());
  launch_adamw(stream_of(ctx), w.f32(), m.f32(), v.f32(), g.f32(), w.numel(),
               {s.beta1, s.beta2, s.eps, s.step_size, s.inv_sqrt_bc2, s.decay, s.grad_scale});
  check_launch(op);
  if (rounded) cuda::cast(ctx, *rounded, w);  // on the same stream, after the update
}

void adamw8bit_update(ExecContext& ctx, Tensor& w, Tensor& m_codes, Tensor& m_absmax,
                      Tensor& v_codes, Tensor& v_absmax, const Tensor& g, const AdamWStep& s) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Optimizer);
  const char* op = "adamw8bit_update";
  const int64_t n = w.numel(), blocks = adamw8bit_blocks(n);
  for (auto [t, name] : {std::pair<const Tensor*, const char*>{&w, "w"},
                         {&m_absmax, "m_absmax"},
                         {&v_absmax, "v_absmax"},
                         {&g, "g"}}) {
    BRAID_CHECK(t->defined() && t->dtype() == DType::F32, "{}: {} is {}; expected f32", op, name,
                t->defined() ? t->str() : std::string("undefined"));
  }
  for (auto [t, name] :
       {std::pair<const Tensor*, const char*>{&m_codes, "m_codes"}, {&v_codes, "v_codes"}}) {
    BRAID_CHECK(t->defined() && t->dtype() == DType::U8 && t->numel() == n,
                "{}: {} is {}; expected u8 with {} elements", op, name,
                t->defined() ? t->str() : std::string("undefined"), n);
  }
  check_shape(g, w.shape(), "adamw8bit_update g");
  check_shape(m_absmax, {blocks}, "adamw8bit_update m_absmax");
  check_shape(v_absmax, {blocks}, "adamw8bit_update v_absmax");
  launch_adamw8bit(stream_of(ctx), w.f32(), m_codes.data<uint8_t>(), m_absmax.f32(),
                   v_codes.data<uint8_t>(), v_absmax.f32(), g.f32(), n,
                   {s.beta1, s.beta2, s.eps, s.step_size, s.inv_sqrt_bc2, s.decay, s.grad_scale});
  check_launch(op);
}

}  // namespace braid::cuda
