// Device memory: a caching allocator behind Allocator (core/memory.h) for GPU tensors, with the
// host allocator's per-category statistics, and the out-of-memory error users see.
//
// Raw memory comes from a DeviceMemorySource: the CUDA runtime in a real run
// (cuda_memory_source), a fake with a fixed capacity in tests, so the caching, the statistics
// and the out-of-memory report are tested on machines without a GPU.
//
// Stream order: one allocator serves one ExecContext, whose kernels run in order on its compute
// stream, and every allocation and free happens on the host in that order. A block freed after
// its last kernel was queued can therefore be handed to the next kernel at once: the stream
// runs the new kernel after the old one finished (the rule PyTorch's caching allocator builds
// on). Work on another stream that uses a block (collectives, copies) must keep the tensor alive
// until an event of that stream has been waited on by the compute stream.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/error.h"
#include "core/memory.h"

namespace braid {

class DeviceMemorySource {
 public:
  virtual ~DeviceMemorySource() = default;
  virtual Device device() const = 0;
  // `bytes` of device memory, or null when the device has no room (other failures throw).
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  // The device's free and total bytes (all processes), for the out-of-memory report.
  virtual void mem_info(size_t* free_bytes, size_t* total_bytes) const = 0;
};

// The CUDA runtime's cudaMalloc/cudaFree on GPU `index` (core/kernels/cuda/runtime.h).
std::unique_ptr<DeviceMemorySource> cuda_memory_source(int index);

// An allocation the device could not hold, even after the cache was returned to it (or with the
// cache kept, the release guard below reporting communication in flight). A UserError:
// the message says what was being allocated, the memory by category, and what to change.
class OutOfMemoryError : public UserError {
 public:
  OutOfMemoryError(std::string head, std::string summary);
  // Adds "for tensor bf16[8, 1024, 768]" once the tensor's shape is known (Tensor::empty).
  void set_tensor(const std::string& tensor);
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  void rebuild();
  std::string head_, tensor_, summary_, message_;
};

// Returning the allocator's cache to the device (cudaFree) waits for every stream of the
// device, communication included; a transfer whose peer needs this process to go on first (a
// pipeline receive posted ahead of its compute) would then never finish. Before an
// out-of-memory retry returns the cache, the allocator calls the process's release guard: it
// waits a bounded time for the communication in flight and returns "" when none is left (the
// cache is returned), or what is still in flight (the allocation fails as out of memory, naming
// it, and the cache is kept). The parallel layer sets it while GPU communicators exist; unset,
// the cache is always returned. Returns the guard it replaces.
using DeviceReleaseGuard = std::function<std::string()>;
DeviceReleaseGuard set_device_release_guard(DeviceReleaseGuard guard);

// What to change when a training step does not fit: the OOM message's closing lines.
extern const char* const kOutOfMemoryAdvice;

class DeviceCachingAllocator final : public Allocator {
 public:
  explicit DeviceCachingAllocator(std::unique_ptr<DeviceMemorySource> source);
  ~DeviceCachingAllocator() override;
  Device device() const override { return source_->device(); }
  void* allocate(size_t bytes, MemCategory cat) override;
  void deallocate(void* p, size_t bytes, MemCategory cat) override;
  MemoryStats stats() const override;
  void release_cached() override;
  void reset_peaks() override;

  // Bytes held from the device (live + cached) and the most ever held.
  int64_t reserved_bytes() const;
  int64_t peak_reserved_bytes() const;
  // A table like torch.cuda.memory_summary(): live, peak and share by category, reserved and
  // cached bytes, and the device's own free/total.
  std::string summary() const;

  // The size a request of `bytes` is rounded to (blocks of that size are shared).
  static size_t block_size(size_t bytes);

 private:
  void* take_cached(size_t n);  // under mu_
  void release_cached_locked();
  std::string summary_locked() const;

  std::unique_ptr<DeviceMemorySource> source_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_blocks_;  // size -> block
  std::map<void*, size_t> block_sizes_;       // every block held from the source
  MemoryStats stats_;
  int64_t reserved_ = 0, peak_reserved_ = 0;
  int64_t device_allocs_ = 0, cache_hits_ = 0, oom_retries_ = 0;
};

}  // namespace braid
