// What the CPU GEMMs keep between calls, owned by one ExecContext (core keeps no thread_local
// or static caches): the buffers bf16/f16 inputs are widened into, and oneDNN's ready matmul
// primitives with their stream. Callers running at the same time (an OpenMP team calling GEMMs
// from inside a parallel region, threads sharing a context) each lease a slot of their own; a
// slot goes back to the pool when its call ends, so a context keeps as many slots as it ever
// had concurrent callers, and two contexts share none.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace braid {

struct OneDnnMatmulCache;  // core/kernels/cpu/gemm_onednn.cpp
struct OneDnnMatmulCacheDeleter {
  void operator()(OneDnnMatmulCache* cache) const;  // defined next to the cache
};

// One caller's share of the workspace.
struct GemmScratch {
  std::vector<float> a_buf, b_buf;  // widened op(A) and op(B), dense
  // oneDNN engine, stream and matmul primitives by shape; made on the first oneDNN matmul.
  std::unique_ptr<OneDnnMatmulCache, OneDnnMatmulCacheDeleter> onednn;
};

class GemmWorkspace {
 public:
  // A slot held for the duration of one GEMM call; returned to the pool on destruction.
  class Lease {
   public:
    Lease(GemmWorkspace& ws, std::unique_ptr<GemmScratch> s) : ws_(&ws), s_(std::move(s)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { ws_->give_back(std::move(s_)); }
    GemmScratch& operator*() const { return *s_; }
    GemmScratch* operator->() const { return s_.get(); }

   private:
    GemmWorkspace* ws_;
    std::unique_ptr<GemmScratch> s_;
  };

  GemmWorkspace() = default;
  GemmWorkspace(const GemmWorkspace&) = delete;
  GemmWorkspace& operator=(const GemmWorkspace&) = delete;

  // A free slot, or a new one when every slot is in use.
  Lease lease();
  // How many slots this workspace has made (its largest number of concurrent callers).
  size_t slots() const;

 private:
  void give_back(std::unique_ptr<GemmScratch> s);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<GemmScratch>> free_;
  size_t made_ = 0;
};

}  // namespace braid
