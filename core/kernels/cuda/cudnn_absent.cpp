// core/kernels/cuda/cudnn_attention.h in a CUDA build without the cuDNN frontend's headers
// (CMakeLists.txt compiles it instead of cudnn/attention_cudnn.cpp): cuDNN never takes a call,
// so attention runs braid's own kernel.
#include "core/kernels/cuda/cuda_state.h"
#include "core/kernels/cuda/cudnn_attention.h"

namespace braid::cuda {

bool cudnn_attention_forward(ExecContext&, Tensor&, Tensor&, const Tensor&, const Tensor&,
                             const Tensor&, int64_t) {
  return false;
}
bool cudnn_attention_backward(ExecContext&, Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&,
                              const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t) {
  return false;
}
void set_cudnn_attention(ExecContext& ctx, bool enabled) {
  state_of(ctx).cudnn_attention = enabled;
}
int64_t cudnn_attention_calls(ExecContext& ctx) { return state_of(ctx).cudnn_attention_calls; }
std::string cudnn_status() {
  return "braid's kernel (built without the cuDNN frontend's headers, which tools/setup.sh "
         "fetches)";
}

}  // namespace braid::cuda
