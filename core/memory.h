// Host memory: a size-bucketed caching allocator with byte counters per category.
//
// Training allocates the same activation sizes every step; returning blocks to the OS and
// faulting them in again costs more than many kernels, so freed blocks are kept for reuse.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace braid {

// What a block holds; counted separately so memory can be reported by category.
enum class MemCategory : uint8_t { Weights, Grads, OptimizerState, Activations, Other, kCount };

const char* mem_category_name(MemCategory c);

struct MemoryStats {
  std::array<int64_t, static_cast<size_t>(MemCategory::kCount)> live_bytes{};
  int64_t live_total = 0;  // bytes handed out now
  int64_t peak_total = 0;  // high-water mark of live_total
  int64_t cached_bytes = 0;  // bytes kept in the free lists
};

// 64-byte aligned host allocation. Thread-safe.
void* host_alloc(size_t bytes, MemCategory cat);
void host_free(void* p, size_t bytes, MemCategory cat);
MemoryStats host_memory_stats();
// Returns every cached block to the OS.
void host_release_cached();

}  // namespace braid
