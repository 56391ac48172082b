// Module: the forward/backward contract every layer and block follows.
#pragma once

#include <vector>

#include "core/parameter.h"
#include "core/saved.h"

namespace braid {

class Module {
 public:
  virtual ~Module() = default;
  // y = f(x); pushes onto `saved` whatever backward needs.
  virtual Tensor forward(const Tensor& x, Saved& saved) = 0;
  // dx from dy; pops what forward pushed; parameter gradients accumulate (+=).
  virtual Tensor backward(const Tensor& dy, Saved& saved) = 0;
  // Appends this module's parameters (recursively), in a fixed order.
  virtual void collect_parameters(std::vector<Parameter*>& out) = 0;
};

}  // namespace braid
