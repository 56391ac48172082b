// cpuid probe for the CpuIsa levels: each level's instructions and the OS's saving of their
// registers (XCR0; for AMX also the kernel's permission to use tile data).
#include "core/kernels/cpu/cpu_isa.h"

#include <fmt/format.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#define BRAID_X86 1
#endif

namespace braid {
namespace {

// The features a level adds to the one below it, each with the name users know it by.
struct Feature {
  CpuIsa level;
  const char* name;
  bool (*present)();
};

#ifdef BRAID_X86
struct CpuidRegs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(unsigned leaf, unsigned subleaf) {
  CpuidRegs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return CpuidRegs{};
  return r;
}

// The register state the OS saves on a context switch (XCR0); 0 without OSXSAVE.
uint64_t xcr0() {
  if (!(cpuid(1, 0).ecx & bit_OSXSAVE)) return 0;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

constexpr uint64_t kXcr0Ymm = 0x6;       // SSE and AVX state
constexpr uint64_t kXcr0Zmm = 0xe6;      // + opmask, upper ZMM halves, ZMM16-31
constexpr uint64_t kXcr0Tile = 0x60000;  // XTILECFG and XTILEDATA
constexpr unsigned kXfeatureTileData = 18;

bool avx2_fma_f16c() {
  const CpuidRegs l1 = cpuid(1, 0);
  return (xcr0() & kXcr0Ymm) == kXcr0Ymm && (l1.ecx & bit_AVX) && (l1.ecx & bit_FMA) &&
         (l1.ecx & bit_F16C) && (cpuid(7, 0).ebx & bit_AVX2);
}
bool avx512_core() {
  const unsigned b = cpuid(7, 0).ebx;
  return (xcr0() & kXcr0Zmm) == kXcr0Zmm && (b & bit_AVX512F) && (b & bit_AVX512DQ) &&
         (b & bit_AVX512BW) && (b & bit_AVX512VL);
}
bool avx512_bf16() { return cpuid(7, 1).eax & bit_AVX512BF16; }
// Linux (5.16+) enables AMX tile data per process on request (ARCH_REQ_XCOMP_PERM); the
// request is what tells: a KVM guest seen here grants it while ARCH_GET_XCOMP_SUPP leaves the
// tile-data bit out. Requesting is idempotent and oneDNN makes the same request for itself.
bool amx_bf16() {
  const unsigned d = cpuid(7, 0).edx;
  if (!(d & bit_AMX_TILE) || !(d & bit_AMX_BF16) || (xcr0() & kXcr0Tile) != kXcr0Tile) return false;
#if defined(__linux__)
  constexpr int kArchReqXcompPerm = 0x1023;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) == 0;
#else
  return true;
#endif
}

const Feature kFeatures[] = {{CpuIsa::Avx2, "AVX2/FMA/F16C", avx2_fma_f16c},
                             {CpuIsa::Avx512, "AVX-512 (F, DQ, BW, VL)", avx512_core},
                             {CpuIsa::Avx512Bf16, "AVX512_BF16", avx512_bf16},
                             {CpuIsa::Amx, "AMX-BF16 enabled by the OS", amx_bf16}};
#else
bool never() { return false; }
const Feature kFeatures[] = {{CpuIsa::Avx2, "AVX2/FMA/F16C (not an x86-64 build)", never},
                             {CpuIsa::Avx512, "AVX-512", never},
                             {CpuIsa::Avx512Bf16, "AVX512_BF16", never},
                             {CpuIsa::Amx, "AMX-BF16", never}};
#endif

// The first level above Scalar whose features are missing, or nullptr when all are present.
const Feature* first_missing() {
  static const Feature* const missing = []() -> const Feature* {
    for (const Feature& f : kFeatures)
      if (!f.present()) return &f;
    return nullptr;
  }();
  return missing;
}

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar:
      return "scalar";
    case CpuIsa::Avx2:
      return "avx2";
    case CpuIsa::Avx512:
      return "avx512";
    case CpuIsa::Avx512Bf16:
      return "avx512_bf16";
    case CpuIsa::Amx:
      return "amx";
  }
  return "unknown";
}

bool parse_cpu_isa(std::string_view s, CpuIsa* out) {
  for (CpuIsa isa : kAllCpuIsas) {
    if (s == cpu_isa_name(isa)) {
      *out = isa;
      return true;
    }
  }
  return false;
}

CpuIsa cpu_isa_detected() {
  const Feature* missing = first_missing();
  if (missing == nullptr) return CpuIsa::Amx;
  return static_cast<CpuIsa>(static_cast<uint8_t>(missing->level) - 1);
}

std::string cpu_isa_missing(CpuIsa isa) {
  const Feature* missing = first_missing();
  if (missing == nullptr || isa < missing->level) return "";
  return fmt::format("this CPU has no {} (the {} level; it runs up to {})", missing->name,
                     cpu_isa_name(missing->level), cpu_isa_name(cpu_isa_detected()));
}

}  // namespace braid
