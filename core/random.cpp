// Counter-based normal initialisation (Box-Muller over the counter hash).
#include "core/random.h"

#include <cmath>

namespace braid {

void fill_normal(Tensor& t, float std, uint64_t seed, uint64_t stream) {
  if (!t.device().is_cpu()) {
    // A device tensor gets the host's values (initialisation happens once, before training).
    Tensor h = Tensor::empty(t.shape(), t.dtype());
    fill_normal(h, std, seed, stream);
    t.copy_from(h);
    return;
  }
  float* p = t.f32();
  const int64_t n = t.numel();
  const uint64_t key = hash_combine(seed, stream);
#pragma omp parallel for schedule(static)
  for (int64_t pair = 0; pair < (n + 1) / 2; ++pair) {
    // Two uniforms per pair; u1 in (0, 1] so log is finite.
    const double u1 = 1.0 - static_cast<double>(hash_combine(key, 2 * pair) >> 11) * 0x1.0p-53;
    const double u2 = static_cast<double>(hash_combine(key, 2 * pair + 1) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double a = 2.0 * M_PI * u2;
    p[2 * pair] = static_cast<float>(std * r * std::cos(a));
    if (2 * pair + 1 < n) p[2 * pair + 1] = static_cast<float>(std * r * std::sin(a));
  }
}

}  // namespace braid
