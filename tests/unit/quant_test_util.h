// A quantised linear test case: a random weight quantised (NF4, blocks of 64, double
// quantisation), its dequantised copy (the reference's weight), a bias, inputs and gradients.
#pragma once

#include "core/kernels/quantize.h"
#include "kernel_test_util.h"

namespace braid::kernel_test {

struct QuantLinearCase {
  QuantizedWeight qw;
  Tensor wd;  // (OUT, IN): qw read back, f32
  Tensor b;   // (OUT)
  Tensor x;   // (N, IN)
  Tensor dy;  // (N, OUT)
};

inline QuantLinearCase quant_linear_case(ExecContext& ctx, int64_t N, int64_t IN, int64_t OUT,
                                         uint64_t seed) {
  QuantLinearCase c;
  const Tensor w = random_tensor({OUT, IN}, seed, -0.1, 0.1);
  c.qw = quantize_weight(ctx, w, QuantCode::Nf4, 64, true);
  c.wd = Tensor::empty({OUT, IN});
  dequantize_weight(ctx, c.wd, c.qw);
  c.b = random_tensor({OUT}, seed + 1);
  c.x = random_tensor({N, IN}, seed + 2);
  c.dy = random_tensor({N, OUT}, seed + 3);
  return c;
}

}  // namespace braid::kernel_test
