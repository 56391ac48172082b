// CPU optimizer update kernels (the per-element AdamW arithmetic is core/kernels/math/adamw.h).
#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/math/adamw.h"
#include "core/profile.h"

namespace braid::cpu {

void adamw_update(ExecContext& ctx, Tensor& w, Tensor& m, Tensor& v, const Tensor& g,
                  const AdamWStep& s) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Optimizer);
  const char* op = "adamw_update";
  for (auto [t, name] :
       {std::pair<const Tensor*, const char*>{&w, "w"}, {&m, "m"}, {&v, "v"}, {&g, "g"}})
    check_f32(*t, op, name);
  check_shape(m, w.shape(), "adamw_update m");
  check_shape(v, w.shape(), "adamw_update v");
  check_shape(g, w.shape(), "adamw_update g");
  float* wp = w.f32();
  float* mp = m.f32();
  float* vp = v.f32();
  const float* gp = g.f32();
  const float b1 = s.beta1, b2 = s.beta2, eps = s.eps, step_size = s.step_size;
  const float inv_sqrt_bc2 = s.inv_sqrt_bc2, decay = s.decay;
  const int64_t n = w.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    math::adamw_element(wp[i], mp[i], vp[i], gp[i], b1, b2, eps, step_size, inv_sqrt_bc2, decay);
  }
}

}  // namespace braid::cpu
