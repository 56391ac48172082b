// GEMM on oneDNN: dnnl_sgemm for f32; for bf16 inputs (f32 out) a matmul primitive cached in
// the caller's GEMM workspace slot (core/kernels/cpu/gemm_workspace.h).
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "core/error.h"
#include "core/kernels/cpu/gemm_backends.h"

namespace braid {
namespace {

// Everything that is baked into a matmul primitive; alpha and beta are in the attributes.
struct MatmulKey {
  bool bf16_in;  // bf16 src/weights, else f32
  bool ta, tb;
  bool bf16_out = false;  // bf16 dst (one rounding of the f32 result), else f32
  bool bias = false;      // an f32 bias row (N) added to every row before the rounding
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  bool operator==(const MatmulKey& o) const {
    return bf16_in == o.bf16_in && ta == o.ta && tb == o.tb && bf16_out == o.bf16_out &&
           bias == o.bias && M == o.M && N == o.N && K == o.K && lda == o.lda && ldb == o.ldb &&
           ldc == o.ldc && std::memcmp(&alpha, &o.alpha, 4) == 0 &&
           std::memcmp(&beta, &o.beta, 4) == 0;
  }
};

struct MatmulKeyHash {
  size_t operator()(const MatmulKey& k) const {
    size_t h = (static_cast<size_t>(k.bias) << 4) | (static_cast<size_t>(k.bf16_out) << 3) |
               (static_cast<size_t>(k.bf16_in) << 2) | (static_cast<size_t>(k.ta) << 1) |
               static_cast<size_t>(k.tb);
    auto mix = [&h](uint64_t v) {
      h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    for (int64_t v : {k.M, k.N, k.K, k.lda, k.ldb, k.ldc}) mix(static_cast<uint64_t>(v));
    uint32_t a, b;
    std::memcpy(&a, &k.alpha, 4);
    std::memcpy(&b, &k.beta, 4);
    mix((static_cast<uint64_t>(a) << 32) | b);
    return h;
  }
};

// A ready primitive and memory objects whose data handles are swapped per call.
struct CachedMatmul {
  dnnl::matmul prim;
  dnnl::memory src, weights, dst, bias;  // bias: empty without one
};

CachedMatmul make_matmul(const dnnl::engine& eng, const MatmulKey& k) {
  using dt = dnnl::memory::data_type;
  // Row-major op(A) (M, K) and op(B) (K, N) expressed through strides, so no copies.
  const dt in_dt = k.bf16_in ? dt::bf16 : dt::f32;
  dnnl::memory::desc src_md({k.M, k.K}, in_dt,
                            k.ta ? dnnl::memory::dims{1, k.lda} : dnnl::memory::dims{k.lda, 1});
  dnnl::memory::desc wei_md({k.K, k.N}, in_dt,
                            k.tb ? dnnl::memory::dims{1, k.ldb} : dnnl::memory::dims{k.ldb, 1});
  dnnl::memory::desc dst_md({k.M, k.N}, k.bf16_out ? dt::bf16 : dt::f32,
                            dnnl::memory::dims{k.ldc, 1});
  // The bias is f32 and broadcast over the rows; oneDNN adds it to the f32 accumulator.
  const dnnl::memory::desc bias_md =
      k.bias ? dnnl::memory::desc({1, k.N}, dt::f32, dnnl::memory::dims{k.N, 1})
             : dnnl::memory::desc();
  dnnl::primitive_attr attr;
  if (k.alpha != 1.0f) attr.set_output_scales(0, {k.alpha});
  if (k.beta != 0.0f) {
    // Without a sum post-op dst is overwritten, so beta == 0 never reads C (NaN-safe).
    dnnl::post_ops po;
    po.append_sum(k.beta);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd(k.bias ? dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md)
                                         : dnnl::matmul::desc(src_md, wei_md, dst_md),
                                  attr, eng);
  return CachedMatmul{dnnl::matmul(pd), dnnl::memory(src_md, eng, DNNL_MEMORY_NONE),
                      dnnl::memory(wei_md, eng, DNNL_MEMORY_NONE),
                      dnnl::memory(dst_md, eng, DNNL_MEMORY_NONE),
                      k.bias ? dnnl::memory(bias_md, eng, DNNL_MEMORY_NONE) : dnnl::memory()};
}

}  // namespace

// One scratch slot's oneDNN state: one caller at a time uses it (GemmWorkspace leases it), so
// the memory objects' data handles and the stream are never shared. Bounded: a run uses a
// handful of shapes; clearing on overflow keeps memory flat.
struct OneDnnMatmulCache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::unordered_map<MatmulKey, CachedMatmul, MatmulKeyHash> matmuls;

  CachedMatmul& get(const MatmulKey& k) {
    auto it = matmuls.find(k);
    if (it != matmuls.end()) return it->second;
    if (matmuls.size() >= 256) matmuls.clear();
    return matmuls.emplace(k, make_matmul(engine, k)).first->second;
  }
};

void OneDnnMatmulCacheDeleter::operator()(OneDnnMatmulCache* cache) const { delete cache; }

namespace {

// Runs the cached primitive of `key` on these buffers (bias: null without one).
void run_matmul(GemmScratch& scratch, const MatmulKey& key, const void* A, const void* B,
                const float* bias, void* C) {
  try {
    if (!scratch.onednn) scratch.onednn.reset(new OneDnnMatmulCache());
    OneDnnMatmulCache& cache = *scratch.onednn;
    CachedMatmul& mm = cache.get(key);
    mm.src.set_data_handle(const_cast<void*>(A));
    mm.weights.set_data_handle(const_cast<void*>(B));
    mm.dst.set_data_handle(C);
    if (key.bias) {
      mm.bias.set_data_handle(const_cast<float*>(bias));
      mm.prim.execute(cache.stream, {{DNNL_ARG_SRC, mm.src},
                                     {DNNL_ARG_WEIGHTS, mm.weights},
                                     {DNNL_ARG_BIAS, mm.bias},
                                     {DNNL_ARG_DST, mm.dst}});
    } else {
      mm.prim.execute(
          cache.stream,
          {{DNNL_ARG_SRC, mm.src}, {DNNL_ARG_WEIGHTS, mm.weights}, {DNNL_ARG_DST, mm.dst}});
    }
    cache.stream.wait();
  } catch (const dnnl::error& e) {
    BRAID_CHECK(false, "oneDNN {} matmul ({}x{}x{}{}{}) failed: {} (status {})",
                key.bf16_in ? "bf16" : "f32", key.M, key.N, key.K, key.bf16_out ? ", bf16 out" : "",
                key.bias ? ", bias" : "", e.what(), static_cast<int>(e.status));
  }
}

void run_matmul(GemmScratch& scratch, bool bf16_in, bool ta, bool tb, int64_t M, int64_t N,
                int64_t K, float alpha, const void* A, int64_t lda, const void* B, int64_t ldb,
                float beta, float* C, int64_t ldc) {
  run_matmul(scratch, MatmulKey{bf16_in, ta, tb, false, false, M, N, K, lda, ldb, ldc, alpha, beta},
             A, B, nullptr, C);
}

}  // namespace

bool onednn_has_native_bf16() {
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned bf16_isa = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (isa & bf16_isa) == bf16_isa;
}

bool onednn_f32_bias_fused() {
  static const bool avx512 = [] {
    const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    const unsigned core = static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
    return (isa & core) == core;
  }();
  return avx512;
}

bool onednn_f32_matmul_preferred(bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  return onednn_f32_bias_fused() && ta && !tb && M >= 1024 && K >= 256 && N < 768;
}

int64_t onednn_bf16_slice_length(bool ta, int64_t N) {
  return ta ? 512 : std::clamp<int64_t>(N, 1024, 4096);
}

int64_t onednn_bf16_k_slice(bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  static const bool amx = [] {
    const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    const unsigned amx_isa = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_amx);
    return (isa & amx_isa) == amx_isa;
  }();
  const bool sliced =
      amx && !tb && (ta ? K >= 1024 && std::min(M, N) >= 512 : M >= 512 && K >= 8192);
  if (!sliced) return K;
  // Equal slices of at least the layout's length, rounded up to 32 so that each starts on a
  // 64-byte boundary of an aligned row.
  const int64_t slices = K / onednn_bf16_slice_length(ta, N);
  return ((K + slices - 1) / slices + 31) / 32 * 32;
}

std::string onednn_isa_name() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return fmt::format("isa {:#x}", static_cast<unsigned>(dnnl_get_effective_cpu_isa()));
  }
}

bool onednn_has_bf16_matmul() {
  // oneDNN 2.6 implements bf16 matmul only from AVX-512 up; below that creation fails. An
  // immutable fact of the machine (and of ONEDNN_MAX_CPU_ISA), probed once.
  static const bool available = [] {
    try {
      const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
      make_matmul(eng, MatmulKey{true, false, false, false, false, 8, 8, 8, 8, 8, 8, 1.0f, 0.0f});
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
}

void gemm_f32_onednn(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                     int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const dnnl_status_t st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  BRAID_CHECK(st == dnnl_success, "dnnl_sgemm failed with status {}", static_cast<int>(st));
}

void gemm_bf16_onednn_sliced(GemmScratch& scratch, int64_t slice, bool ta, bool tb, int64_t M,
                             int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
                             const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  BRAID_CHECK(slice > 0 && K > 0, "gemm_bf16_onednn_sliced: slice {} and K {} must be positive",
              slice, K);
  // op(A)'s slice: columns k0.. of A, or rows when transposed; op(B)'s: rows k0.. of B, or
  // columns when transposed.
  for (int64_t k0 = 0; k0 < K; k0 += slice)
    run_matmul(scratch, true, ta, tb, M, N, std::min(slice, K - k0), alpha,
               A + (ta ? k0 * lda : k0), lda, B + (tb ? k0 : k0 * ldb), ldb, k0 == 0 ? beta : 1.0f,
               C, ldc);
}

void gemm_bf16_out_onednn(GemmScratch& scratch, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                          const bf16* A, int64_t lda, const bf16* B, int64_t ldb, const float* bias,
                          bool accumulate, bf16* C, int64_t ldc) {
  run_matmul(scratch,
             MatmulKey{true, ta, tb, true, bias != nullptr, M, N, K, lda, ldb, ldc, 1.0f,
                       accumulate ? 1.0f : 0.0f},
             A, B, bias, C);
}

void gemm_f32_onednn_matmul(GemmScratch& scratch, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                            float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                            float beta, float* C, int64_t ldc) {
  run_matmul(scratch, false, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_f32_bias_onednn(GemmScratch& scratch, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                          const float* A, int64_t lda, const float* B, int64_t ldb,
                          const float* bias, float* C, int64_t ldc) {
  run_matmul(scratch, MatmulKey{false, ta, tb, false, true, M, N, K, lda, ldb, ldc, 1.0f, 0.0f}, A,
             B, bias, C);
}

size_t onednn_cached_matmuls(const GemmScratch& scratch) {
  return scratch.onednn ? scratch.onednn->matmuls.size() : 0;
}

}  // namespace braid
