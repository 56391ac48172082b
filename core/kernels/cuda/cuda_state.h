// The CUDA backend's per-context state (ExecContext::backend_state): the cuBLASLt handle, its
// workspace, the algorithm cache by GEMM shape, and options. Made on first use by state_of(ctx).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/context.h"

namespace braid::cuda {

struct GemmKey {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  int ab, c;
  bool beta_zero;
  bool tf32;
  // Byte alignment (a power of two, at most 256) of the A, B and C pointers: an algorithm chosen
  // for aligned operands may refuse, or misread, a view that starts mid-row.
  int align_a, align_b, align_c;
  // The bias epilogue (a per-output-column vector added in f32 before C is rounded): -1 none,
  // else the bias dtype; and the bias pointer's alignment (the algorithm search reads it).
  int bias = -1;
  int align_bias = 0;
  auto tie() const {
    return std::tie(ta, tb, m, n, k, lda, ldb, ldc, ab, c, beta_zero, tf32, align_a, align_b,
                    align_c, bias, align_bias);
  }
  bool operator<(const GemmKey& o) const { return tie() < o.tie(); }
};

struct GemmPlanCache {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = true;  // false: cuBLASLt had no algorithm (cached so the search runs once)
};

// cuDNN's per-context state (handle, graphs by shape), defined by cudnn/attention_cudnn.cpp.
class CudnnCache {
 public:
  virtual ~CudnnCache() = default;
};

// Page-locked staging slots for small host -> device copies (token batches): each slot is reused
// once the copy queued from it has completed (its event), so the host never waits for the GPU
// while a step's batches are queued.
struct PinnedRing {
  struct Slot {
    void* host = nullptr;
    size_t capacity = 0;
    void* event = nullptr;  // recorded after the copy from this slot
    bool pending = false;
  };
  std::vector<Slot> slots;
  size_t next = 0;
  ~PinnedRing();
};

class CudaState final : public BackendState {
 public:
  explicit CudaState(ExecContext& ctx);
  ~CudaState() override;
  cublasLtHandle_t lt = nullptr;
  Tensor workspace;  // cuBLASLt's scratch, from the context's allocator
  std::map<GemmKey, GemmPlanCache> plans;
  bool allow_tf32 = false;
  bool deterministic = true;  // cuDNN attention's backward in its deterministic order
  // Attention through cuDNN where it takes the case (cudnn_attention.h); BRAID_CUDNN_ATTENTION=0
  // in the environment starts it off.
  bool cudnn_attention = true;
  int64_t cudnn_attention_calls = 0;
  std::unique_ptr<CudnnCache> cudnn;  // made on first use
  PinnedRing pinned;                  // upload_small's slots
};

CudaState& state_of(ExecContext& ctx);

}  // namespace braid::cuda
