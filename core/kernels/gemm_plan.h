// Which CPU library runs braid's GEMMs, and how bf16 inputs are handled: a value held by an
// ExecContext (core/context.h). launch/ builds it (from BRAID_GEMM, see launch/train/exec_setup.h);
// core never reads the environment.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/kernels/cpu/cpu_isa.h"

namespace braid {

// The CPU libraries braid can run a GEMM on. Reference is plain loops: slow, always correct.
enum class GemmBackend : uint8_t { OneDnn, OpenBlas, Reference };

inline constexpr GemmBackend kAllGemmBackends[] = {GemmBackend::OneDnn, GemmBackend::OpenBlas,
                                                   GemmBackend::Reference};

std::string_view gemm_backend_label(GemmBackend b);  // "onednn", "openblas", "reference"
// Parses a label above; returns false when unknown.
bool parse_gemm_backend(std::string_view s, GemmBackend* out);

// How gemm_bf16 runs: the library's own bf16 kernel, or widening the inputs to f32 and
// running the f32 GEMM of the same library (fast where the CPU has no bf16 dot instructions).
enum class Bf16Mode : uint8_t { Native, Widen };

struct GemmPlan {
  GemmBackend backend = GemmBackend::OneDnn;
  Bf16Mode bf16_mode = Bf16Mode::Widen;
};

// The plan for `backend` at instruction-set level `isa`: native bf16 where the level has bf16
// dot products (AVX512_BF16 or AMX) and the library has a bf16 kernel to run on them
// (native_bf16_available: oneDNN's bf16 matmul at its effective ISA, OpenBLAS's sbgemm), else
// widening; the reference loops are native everywhere. Measured choice of oneDNN as the default
// backend: docs/benchmarks.md.
GemmPlan default_gemm_plan(GemmBackend backend, CpuIsa isa);

}  // namespace braid
