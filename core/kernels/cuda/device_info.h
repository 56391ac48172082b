// A round-trip smoke kernel (only built with the CUDA backend; see BRAID_CUDA).
#pragma once

#include <string>

#include "core/kernels/cuda/runtime.h"

namespace braid::cuda {

// Runs y += 2x on n elements on the current GPU and checks the result; "" on success, else the
// error.
std::string smoke_test(int n);

}  // namespace braid::cuda
