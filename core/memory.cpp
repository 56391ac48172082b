// Caching host allocator.
#include "core/memory.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

namespace braid {

namespace {

// Blocks are rounded up so that near-equal sizes share a free list.
size_t round_size(size_t bytes) {
  if (bytes <= 4096) return (bytes + 63) & ~size_t{63};
  return (bytes + 4095) & ~size_t{4095};
}

struct HostPool {
  std::mutex mu;
  std::map<size_t, std::vector<void*>> free_lists;
  MemoryStats stats;
};

// The pool lives for the whole process (like malloc's own arenas); it is never destroyed so
// that tensors freed during static destruction stay safe.
HostPool& pool() {
  static HostPool* p = new HostPool();
  return *p;
}

}  // namespace

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::Weights: return "weights";
    case MemCategory::Grads: return "grads";
    case MemCategory::OptimizerState: return "optimizer";
    case MemCategory::Activations: return "activations";
    default: return "other";
  }
}

void* host_alloc(size_t bytes, MemCategory cat) {
  const size_t n = round_size(bytes == 0 ? 1 : bytes);
  HostPool& p = pool();
  void* ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    auto it = p.free_lists.find(n);
    if (it != p.free_lists.end() && !it->second.empty()) {
      ptr = it->second.back();
      it->second.pop_back();
      p.stats.cached_bytes -= static_cast<int64_t>(n);
    }
  }
  if (ptr == nullptr) {
    ptr = std::aligned_alloc(64, n);
    if (ptr == nullptr) throw std::bad_alloc();
  }
  std::lock_guard<std::mutex> lock(p.mu);
  p.stats.live_bytes[static_cast<size_t>(cat)] += static_cast<int64_t>(n);
  p.stats.live_total += static_cast<int64_t>(n);
  if (p.stats.live_total > p.stats.peak_total) p.stats.peak_total = p.stats.live_total;
  return ptr;
}

void host_free(void* ptr, size_t bytes, MemCategory cat) {
  if (ptr == nullptr) return;
  const size_t n = round_size(bytes == 0 ? 1 : bytes);
  HostPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  p.stats.live_bytes[static_cast<size_t>(cat)] -= static_cast<int64_t>(n);
  p.stats.live_total -= static_cast<int64_t>(n);
  p.free_lists[n].push_back(ptr);
  p.stats.cached_bytes += static_cast<int64_t>(n);
}

MemoryStats host_memory_stats() {
  HostPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.stats;
}

void host_release_cached() {
  HostPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  for (auto& [size, list] : p.free_lists) {
    for (void* ptr : list) std::free(ptr);
    list.clear();
  }
  p.stats.cached_bytes = 0;
}

}  // namespace braid
