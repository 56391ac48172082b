// Host allocators: plain (stateless) and caching (per context).
#include "core/memory.h"

#include <fmt/format.h>

#include <cstdlib>
#include <new>
#include <string>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace braid {

namespace {

// Blocks are rounded up so that near-equal sizes share a free list.
size_t round_size(size_t bytes) {
  if (bytes <= 4096) return (bytes + 63) & ~size_t{63};
  return (bytes + 4095) & ~size_t{4095};
}

void* aligned_or_throw(size_t n, HostPages pages = HostPages::Small) {
#ifdef __linux__
  if (pages == HostPages::Huge && n >= kHugePageBytes) {
    void* p = nullptr;
    if (::posix_memalign(&p, kHugePageBytes, n) != 0) throw std::bad_alloc();
    // Advice only: where the kernel has THP off, the block stays on small pages.
    (void)::madvise(p, n, MADV_HUGEPAGE);
    return p;
  }
#else
  (void)pages;
#endif
  void* p = std::aligned_alloc(64, n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

class PlainHostAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu(); }
  void* allocate(size_t bytes, MemCategory) override {
    return aligned_or_throw(round_size(bytes == 0 ? 1 : bytes));
  }
  void deallocate(void* p, size_t, MemCategory) override { std::free(p); }
  MemoryStats stats() const override { return {}; }
};

}  // namespace

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::Weights:
      return "weights";
    case MemCategory::MasterWeights:
      return "master_weights";
    case MemCategory::Grads:
      return "grads";
    case MemCategory::OptimizerState:
      return "optimizer";
    case MemCategory::Activations:
      return "activations";
    case MemCategory::Communication:
      return "communication";
    case MemCategory::Workspace:
      return "workspace";
    default:
      return "other";
  }
}

std::shared_ptr<Allocator> plain_host_allocator() {
  // Immutable after construction (it has no state at all).
  static const std::shared_ptr<Allocator> a = std::make_shared<PlainHostAllocator>();
  return a;
}

CachingHostAllocator::~CachingHostAllocator() { release_cached(); }

void* CachingHostAllocator::allocate(size_t bytes, MemCategory cat) {
  const size_t n = round_size(bytes == 0 ? 1 : bytes);
  void* ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_lists_.find(n);
    if (it != free_lists_.end() && !it->second.empty()) {
      ptr = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= static_cast<int64_t>(n);
    }
  }
  if (ptr == nullptr) ptr = aligned_or_throw(n, pages_);
  std::lock_guard<std::mutex> lock(mu_);
  const auto c = static_cast<size_t>(cat);
  stats_.live_bytes[c] += static_cast<int64_t>(n);
  if (stats_.live_bytes[c] > stats_.peak_bytes[c]) stats_.peak_bytes[c] = stats_.live_bytes[c];
  stats_.live_total += static_cast<int64_t>(n);
  if (stats_.live_total > stats_.peak_total) stats_.peak_total = stats_.live_total;
  return ptr;
}

void CachingHostAllocator::deallocate(void* ptr, size_t bytes, MemCategory cat) {
  if (ptr == nullptr) return;
  const size_t n = round_size(bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.live_bytes[static_cast<size_t>(cat)] -= static_cast<int64_t>(n);
  stats_.live_total -= static_cast<int64_t>(n);
  free_lists_[n].push_back(ptr);
  stats_.cached_bytes += static_cast<int64_t>(n);
}

MemoryStats CachingHostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingHostAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, list] : free_lists_) {
    for (void* ptr : list) std::free(ptr);
    list.clear();
  }
  stats_.cached_bytes = 0;
}

void CachingHostAllocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes = stats_.live_bytes;
  stats_.peak_total = stats_.live_total;
}

std::string memory_peaks_line(const MemoryStats& s) {
  std::string line;
  for (int c = 0; c < kMemCategories; ++c) {
    if (s.peak_bytes[c] == 0) continue;
    if (!line.empty()) line += " | ";
    line += fmt::format("{} {:.1f} MiB", mem_category_name(static_cast<MemCategory>(c)),
                        static_cast<double>(s.peak_bytes[c]) / 1048576.0);
  }
  return line;
}

}  // namespace braid
