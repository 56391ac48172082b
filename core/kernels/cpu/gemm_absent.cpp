// The oneDNN and OpenBLAS entry points of a build without those libraries (BRAID_CORE_ONLY on a
// machine that lacks them, such as a GPU node that builds only the CUDA backend and its tests):
// nothing offers native bf16, the default plan falls back to the reference GEMM
// (core/kernels/gemm_plan.h), and a forced call says which library is missing.
#include "core/kernels/cpu/gemm_backends.h"

#if BRAID_NO_ONEDNN
namespace braid {

struct OneDnnMatmulCache {};
void OneDnnMatmulCacheDeleter::operator()(OneDnnMatmulCache* cache) const { delete cache; }

namespace {
[[noreturn]] void no_onednn() {
  throw UserError("this braid was built without oneDNN; use BRAID_GEMM=reference");
}
}  // namespace

bool onednn_has_native_bf16() { return false; }
std::string onednn_isa_name() { return "none (built without oneDNN)"; }
bool onednn_has_bf16_matmul() { return false; }
bool onednn_f32_matmul_preferred(bool, bool, int64_t, int64_t, int64_t) { return false; }
bool onednn_f32_bias_fused() { return false; }
int64_t onednn_bf16_k_slice(bool, bool, int64_t, int64_t, int64_t K) { return K; }
int64_t onednn_bf16_slice_length(bool, int64_t) { no_onednn(); }
void gemm_f32_bias_onednn(GemmScratch&, bool, bool, int64_t, int64_t, int64_t, const float*,
                          int64_t, const float*, int64_t, const float*, float*, int64_t) {
  no_onednn();
}
void gemm_f32_onednn(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                     const float*, int64_t, float, float*, int64_t) {
  no_onednn();
}
void gemm_bf16_onednn_sliced(GemmScratch&, int64_t, bool, bool, int64_t, int64_t, int64_t, float,
                             const bf16*, int64_t, const bf16*, int64_t, float, float*, int64_t) {
  no_onednn();
}
void gemm_bf16_out_onednn(GemmScratch&, bool, bool, int64_t, int64_t, int64_t, const bf16*, int64_t,
                          const bf16*, int64_t, const float*, bool, bf16*, int64_t) {
  no_onednn();
}
void gemm_f32_onednn_matmul(GemmScratch&, bool, bool, int64_t, int64_t, int64_t, float,
                            const float*, int64_t, const float*, int64_t, float, float*, int64_t) {
  no_onednn();
}
size_t onednn_cached_matmuls(const GemmScratch&) { return 0; }

}  // namespace braid
#endif

#if BRAID_NO_OPENBLAS
namespace braid {

namespace {
[[noreturn]] void no_openblas() {
  throw UserError("this braid was built without OpenBLAS; use BRAID_GEMM=reference");
}
}  // namespace

bool openblas_has_sbgemm() { return false; }
void gemm_f32_openblas(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                       const float*, int64_t, float, float*, int64_t) {
  no_openblas();
}
void gemm_bf16_openblas(bool, bool, int64_t, int64_t, int64_t, float, const bf16*, int64_t,
                        const bf16*, int64_t, float, float*, int64_t) {
  no_openblas();
}

}  // namespace braid
#endif
