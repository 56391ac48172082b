// bench_onednn_libs: two oneDNN builds side by side in one process, on the benchmark model's
// training GEMM shapes. Each library is opened with dlopen (RTLD_LOCAL | RTLD_DEEPBIND, so the
// two keep their own symbols) and called through the C GEMM entry points that every oneDNN
// release since 1.x exports with the same signature: dnnl_sgemm (f32) and
// dnnl_gemm_bf16bf16f32 (bf16 inputs, f32 output). Libraries are interleaved shape by shape and
// call by call, so load drift hits them alike; the table is the median GFLOP/s per shape.
//
//   bench_onednn_libs [--reps N] [--bf16] LIB_A [LIB_B]
//   e.g. bench_onednn_libs --bf16 libdnnl.so.2 /tmp/venv-onednn/lib/libdnnl.so.3
// (a library's own dependencies must be findable: LD_LIBRARY_PATH for a wheel's lib folder).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/memory.h"

namespace {

using Sgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t,
                      const float*, int64_t, float, float*, int64_t);
using Bf16Gemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t,
                         const uint16_t*, int64_t, float, float*, int64_t);
struct Version {
  int major, minor, patch;
  const char* hash;
  unsigned cpu_runtime, gpu_runtime;
};
using VersionFn = const Version* (*)();

struct Lib {
  std::string path, version;
  Sgemm sgemm = nullptr;
  Bf16Gemm bf16 = nullptr;
};

Lib open_lib(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) {
    std::fprintf(stderr, "bench_onednn_libs: cannot open %s: %s\n", path.c_str(), dlerror());
    std::exit(2);
  }
  Lib lib;
  lib.path = path;
  lib.sgemm = reinterpret_cast<Sgemm>(dlsym(h, "dnnl_sgemm"));
  lib.bf16 = reinterpret_cast<Bf16Gemm>(dlsym(h, "dnnl_gemm_bf16bf16f32"));
  auto version = reinterpret_cast<VersionFn>(dlsym(h, "dnnl_version"));
  if (!lib.sgemm || !version) {
    std::fprintf(stderr, "bench_onednn_libs: %s is not a oneDNN library (no dnnl_sgemm)\n",
                 path.c_str());
    std::exit(2);
  }
  const Version* v = version();
  lib.version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                std::to_string(v->patch);
  return lib;
}

struct Shape {
  const char* name;
  char ta, tb;
  int64_t M, N, K;
};

// Row-major C (M, N) = op(A) op(B); the C API is row-major too.
double run_once(const Lib& lib, bool bf16, const Shape& s, const braid::AlignedVector<float>& a,
                const braid::AlignedVector<float>& b, const braid::AlignedVector<uint16_t>& a16,
                const braid::AlignedVector<uint16_t>& b16, braid::AlignedVector<float>& c) {
  const int64_t lda = s.ta == 'T' ? s.M : s.K, ldb = s.tb == 'T' ? s.K : s.N;
  const auto t0 = std::chrono::steady_clock::now();
  const int status =
      bf16 ? lib.bf16(s.ta, s.tb, s.M, s.N, s.K, 1.0f, a16.data(), lda, b16.data(), ldb, 0.0f,
                      c.data(), s.N)
           : lib.sgemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                       c.data(), s.N);
  const double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (status != 0) {
    std::fprintf(stderr, "bench_onednn_libs: %s %s failed with status %d on %s\n",
                 lib.path.c_str(), bf16 ? "dnnl_gemm_bf16bf16f32" : "dnnl_sgemm", status, s.name);
    std::exit(1);
  }
  return 2.0 * static_cast<double>(s.M * s.N * s.K) / sec / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  bool bf16 = false;
  std::vector<Lib> libs;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
      if (reps < 1) {
        std::fprintf(stderr, "bench_onednn_libs: --reps %s: expected a positive count\n", argv[i]);
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--bf16")) {
      bf16 = true;
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "usage: bench_onednn_libs [--reps N] [--bf16] LIB_A [LIB_B]\n");
      return 2;
    } else {
      libs.push_back(open_lib(argv[i]));
    }
  }
  if (libs.empty() || libs.size() > 2) {
    std::fprintf(stderr, "usage: bench_onednn_libs [--reps N] [--bf16] LIB_A [LIB_B]\n");
    return 2;
  }
  // Training shapes of the benchmark model (tokens 2048, width 512, ffn 2048, vocab 8192).
  const Shape shapes[] = {
      {"qkv fwd", 'N', 'T', 2048, 1536, 512},     {"qkv dx", 'N', 'N', 2048, 512, 1536},
      {"qkv dW", 'T', 'N', 1536, 512, 2048},      {"fc1 fwd", 'N', 'T', 2048, 2048, 512},
      {"fc1 dx", 'N', 'N', 2048, 512, 2048},      {"fc1 dW", 'T', 'N', 2048, 512, 2048},
      {"fc2 fwd", 'N', 'T', 2048, 512, 2048},     {"fc2 dx", 'N', 'N', 2048, 2048, 512},
      {"fc2 dW", 'T', 'N', 512, 2048, 2048},      {"lm_head fwd", 'N', 'T', 2048, 8192, 512},
      {"lm_head dx", 'N', 'N', 2048, 512, 8192},  {"lm_head dW", 'T', 'N', 8192, 512, 2048},
      {"peak", 'N', 'N', 2048, 2048, 2048},
  };
  const size_t big = size_t{8192} * 2048;
  // 64-byte aligned, as tensors are: oneDNN's bf16 rates depend on it (core/memory.h).
  braid::AlignedVector<float> a(big), b(big), c(big);
  braid::AlignedVector<uint16_t> a16(big), b16(big);
  for (size_t i = 0; i < big; ++i) {
    a[i] = static_cast<float>(static_cast<int>(i * 7 % 13) - 6) / 8.0f;
    b[i] = static_cast<float>(static_cast<int>(i * 5 % 11) - 5) / 8.0f;
    uint32_t ua, ub;  // exact in bf16: the top 16 bits
    std::memcpy(&ua, &a[i], 4);
    std::memcpy(&ub, &b[i], 4);
    a16[i] = static_cast<uint16_t>(ua >> 16);
    b16[i] = static_cast<uint16_t>(ub >> 16);
  }
  for (const Lib& l : libs)
    if (bf16 && !l.bf16) {
      std::fprintf(stderr, "bench_onednn_libs: %s has no dnnl_gemm_bf16bf16f32\n", l.path.c_str());
      return 2;
    }
  std::printf("bench_onednn_libs: %s GEMM, median of %d calls after one warm-up, GFLOP/s\n",
              bf16 ? "bf16 (f32 out)" : "f32", reps);
  std::printf("%-12s %-16s", "shape", "M x N x K");
  for (const Lib& l : libs) std::printf(" %14s", ("oneDNN " + l.version).c_str());
  if (libs.size() == 2) std::printf(" %8s", "B / A");
  std::printf("\n");
  std::vector<double> total(libs.size(), 0.0);
  for (const Shape& s : shapes) {
    std::vector<std::vector<double>> rates(libs.size());
    for (const Lib& l : libs) run_once(l, bf16, s, a, b, a16, b16, c);  // warm-up
    for (int r = 0; r < reps; ++r)
      for (size_t i = 0; i < libs.size(); ++i)
        rates[i].push_back(run_once(libs[i], bf16, s, a, b, a16, b16, c));
    const std::string dims =
        std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
    std::printf("%-12s %-16s", s.name, dims.c_str());
    std::vector<double> med(libs.size());
    for (size_t i = 0; i < libs.size(); ++i) {
      std::sort(rates[i].begin(), rates[i].end());
      med[i] = rates[i][rates[i].size() / 2];
      if (std::strcmp(s.name, "peak") != 0)
        total[i] += 2.0 * static_cast<double>(s.M * s.N * s.K) / (med[i] * 1e9);
      std::printf(" %14.1f", med[i]);
    }
    if (libs.size() == 2) std::printf(" %8.3f", med[1] / med[0]);
    std::printf("\n");
  }
  std::printf("%-29s", "12 training shapes, ms");
  for (double t : total) std::printf(" %14.1f", t * 1e3);
  if (libs.size() == 2) std::printf(" %8.3f", total[0] / total[1]);
  std::printf("\n");
  return 0;
}
