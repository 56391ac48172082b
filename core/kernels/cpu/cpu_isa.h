// The CPU instruction-set levels braid's CPU kernels choose their paths by: the one place
// that probes the CPU (cpuid), and the cap an ExecContext holds (ExecOptions::cpu_isa), so that
// tests can run every path a machine allows and a user can run as on an older CPU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace braid {

// Each level includes the ones below it; what braid does differently at each:
enum class CpuIsa : uint8_t {
  Scalar,      // plain C++ loops everywhere (any x86-64, or another architecture)
  Avx2,        // AVX2 + FMA + F16C: small_gemm's register tiles, vec_math rows, AVX2 conversions
  Avx512,      // + AVX-512 F/DQ/BW/VL: small_gemm's 12 x 32 zmm tiles (oneDNN's avx512_core)
  Avx512Bf16,  // + AVX512_BF16: VCVTNEPS2BF16 conversions, bf16 dot products (native bf16 GEMM)
  Amx,         // + AMX-TILE/AMX-BF16 granted by the OS: oneDNN's AMX kernels, AMX attention tiles
};

inline constexpr CpuIsa kAllCpuIsas[] = {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512,
                                         CpuIsa::Avx512Bf16, CpuIsa::Amx};

// "scalar", "avx2", "avx512", "avx512_bf16", "amx".
std::string_view cpu_isa_name(CpuIsa isa);
// Parses a name above; returns false when unknown.
bool parse_cpu_isa(std::string_view s, CpuIsa* out);

// The highest level this CPU and OS support (cpuid and XCR0, probed once per process: an
// immutable fact of the machine, not state).
CpuIsa cpu_isa_detected();
inline bool cpu_isa_supported(CpuIsa isa) { return isa <= cpu_isa_detected(); }
// Why `isa` cannot run here, naming the first missing feature ("this CPU has no AVX512_BF16"),
// or "" when it can: the reason tests skip with and errors quote.
std::string cpu_isa_missing(CpuIsa isa);

}  // namespace braid
