// Small elementwise ops used to glue layers (residual add and friends).
#pragma once

#include "core/tensor.h"

namespace braid {

// y = a + b (same shape); y may alias a or b. The residual connection's forward.
void add(Tensor& y, const Tensor& a, const Tensor& b);
// y += x (same shape). The residual connection's backward (gradient flows to both branches).
void add_inplace(Tensor& y, const Tensor& x);
// x *= s.
void scale_inplace(Tensor& x, float s);
// Sum of squares in double (deterministic for a given thread count), for gradient norms.
double sum_squares(const Tensor& x);

}  // namespace braid
