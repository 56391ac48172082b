// CUDA device probing (only built when the CUDA backend is on; see BRAID_CUDA).
#pragma once

#include <string>

namespace braid::cuda {

// Number of visible GPUs; 0 when there is no driver or no device.
int device_count();
// Runs y += 2x on n elements on GPU 0 and checks the result; "" on success, else the error.
std::string smoke_test(int n);

}  // namespace braid::cuda
