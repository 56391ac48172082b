// Allocators: where a tensor's bytes come from, with byte counters per category.
//
// An ExecContext owns one allocator per rank (core/context.h); tensors keep a reference to the
// allocator that made them, so `empty_like` allocates beside its input and memory is counted
// per context, never in a process-wide pool.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "core/device.h"

namespace braid {

// What a block holds; counted separately so memory can be reported by category.
enum class MemCategory : uint8_t {
  Weights,         // parameters used for compute
  MasterWeights,   // fp32 copies kept by a mixed-precision optimizer
  Grads,           // parameter gradients (and gradient buckets)
  OptimizerState,  // AdamW moments
  Activations,     // the stash and everything a step allocates on the way
  Communication,   // collective buffers
  Workspace,       // kernel scratch (packing buffers, logits chunks)
  Other,
  kCount
};
constexpr int kMemCategories = static_cast<int>(MemCategory::kCount);

// "weights", "master_weights", "grads", "optimizer", "activations", "communication",
// "workspace", "other"
const char* mem_category_name(MemCategory c);

struct MemoryStats {
  std::array<int64_t, kMemCategories> live_bytes{};
  std::array<int64_t, kMemCategories> peak_bytes{};  // high-water mark per category
  int64_t live_total = 0;                            // bytes handed out now
  int64_t peak_total = 0;                            // high-water mark of live_total
  int64_t cached_bytes = 0;                          // bytes kept in the free lists
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  // At least `bytes` (64-byte aligned); never null (throws std::bad_alloc).
  virtual void* allocate(size_t bytes, MemCategory cat) = 0;
  virtual void deallocate(void* p, size_t bytes, MemCategory cat) = 0;
  virtual MemoryStats stats() const = 0;
  // Returns cached blocks to the system (no-op where nothing is cached).
  virtual void release_cached() {}
  // Starts a new peak measurement from the current live bytes.
  virtual void reset_peaks() {}
};

// Host memory straight from aligned_alloc, no caching and no counters: for tensors made
// outside any context (data batches, files read from disk, test constants). Stateless, so one
// shared instance is safe.
std::shared_ptr<Allocator> plain_host_allocator();

// Which pages a caching host allocator's large blocks sit on. Huge: blocks of at least
// kHugePageBytes start on a 2 MiB boundary and are advised to Linux as transparent huge pages
// (madvise, which is all a kernel in THP "madvise" mode needs): fewer TLB misses, 2-5 % of a
// CPU training step (docs/benchmarks.md), for a slower first touch of each block. Small:
// ordinary 4 KiB pages, 64-byte alignment. Elsewhere than Linux both are Small.
enum class HostPages : uint8_t { Small, Huge };
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Host memory with a size-bucketed cache: training allocates the same activation sizes every
// step, and returning blocks to the OS and faulting them in again costs more than many
// kernels. Thread-safe; counts live and peak bytes per category.
class CachingHostAllocator final : public Allocator {
 public:
  explicit CachingHostAllocator(HostPages pages = HostPages::Huge) : pages_(pages) {}
  ~CachingHostAllocator() override;
  Device device() const override { return Device::cpu(); }
  void* allocate(size_t bytes, MemCategory cat) override;
  void deallocate(void* p, size_t bytes, MemCategory cat) override;
  MemoryStats stats() const override;
  void release_cached() override;
  void reset_peaks() override;

 private:
  const HostPages pages_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_lists_;
  MemoryStats stats_;
};

// "weights 12.0 MiB | grads 12.0 MiB | ..." of the peak bytes per category (non-zero only).
std::string memory_peaks_line(const MemoryStats& s);

// A std::vector whose storage is 64-byte aligned, as every tensor's is: for GEMM operands
// that are not tensors (the GEMM peak probes, benchmarks), whose rates depend on it. oneDNN's
// AMX bf16 matmul ran 1024^3 at 1480-1540 GFLOP/s with its operands 16 or 32 bytes past a
// 64-byte boundary (where malloc puts large blocks) and at 2090 aligned; f32 sgemm within 3 %
// (bench_gemm, docs/benchmarks.md).
template <class T>
struct Align64Allocator {
  using value_type = T;
  Align64Allocator() = default;
  template <class U>
  Align64Allocator(const Align64Allocator<U>& /*other*/) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, size_t /*n*/) { ::operator delete (p, std::align_val_t{64}); }
  friend bool operator==(const Align64Allocator&, const Align64Allocator&) { return true; }
};
template <class T>
using AlignedVector = std::vector<T, Align64Allocator<T>>;

}  // namespace braid
