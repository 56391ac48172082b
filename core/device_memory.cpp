// The device caching allocator and its out-of-memory report (core/device_memory.h).
#include "core/device_memory.h"

#include <fmt/format.h>

#include <mutex>
#include <utility>

#include "core/kernels/cuda/runtime.h"

namespace braid {

namespace {

double gib(int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); }
double mib(int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

std::string bytes_str(int64_t b) {
  if (b >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", gib(b));
  return fmt::format("{:.1f} MiB", mib(b));
}

class CudaMemorySource final : public DeviceMemorySource {
 public:
  explicit CudaMemorySource(int index) : index_(index) {}
  Device device() const override { return Device::cuda(index_); }
  void* allocate(size_t bytes) override { return cuda::malloc_device(bytes); }
  void release(void* p) override { cuda::free_device(p); }
  void mem_info(size_t* free_bytes, size_t* total_bytes) const override {
    cuda::mem_get_info(free_bytes, total_bytes);
  }

 private:
  int index_;
};

std::mutex& guard_mutex() {
  static std::mutex m;
  return m;
}

DeviceReleaseGuard& release_guard() {
  static DeviceReleaseGuard g;
  return g;
}

// "" when the cache may be returned now, else what is in flight on the device.
std::string release_blocked_by() {
  DeviceReleaseGuard g;
  {
    std::lock_guard<std::mutex> lock(guard_mutex());
    g = release_guard();
  }
  return g ? g() : std::string();
}

}  // namespace

DeviceReleaseGuard set_device_release_guard(DeviceReleaseGuard guard) {
  std::lock_guard<std::mutex> lock(guard_mutex());
  std::swap(release_guard(), guard);
  return guard;
}

std::unique_ptr<DeviceMemorySource> cuda_memory_source(int index) {
  return std::make_unique<CudaMemorySource>(index);
}

const char* const kOutOfMemoryAdvice =
    "To fit, any of: lower data.micro_batch (raise data.grad_accum to keep the batch); "
    "train.checkpointing: selective (or full); train.precision: bf16; train only a LoRA adapter "
    "(a lora: section); or split the model over more GPUs with parallel.tp or parallel.pp. "
    "`braid train --dry-run` shows the plan by category before a run.";

OutOfMemoryError::OutOfMemoryError(std::string head, std::string summary)
    : UserError(head), head_(std::move(head)), summary_(std::move(summary)) {
  rebuild();
}

void OutOfMemoryError::set_tensor(const std::string& tensor) {
  tensor_ = tensor;
  rebuild();
}

void OutOfMemoryError::rebuild() {
  message_ = head_;
  if (!tensor_.empty()) message_ += " for tensor " + tensor_;
  message_ += "\n" + summary_ + kOutOfMemoryAdvice;
}

DeviceCachingAllocator::DeviceCachingAllocator(std::unique_ptr<DeviceMemorySource> source)
    : source_(std::move(source)) {}

DeviceCachingAllocator::~DeviceCachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  // Live blocks belong to tensors that outlive the allocator only through a bug; they are
  // returned with the cache so that the device memory is not leaked either way.
  for (auto& [p, n] : block_sizes_) source_->release(p);
  block_sizes_.clear();
  free_blocks_.clear();
}

size_t DeviceCachingAllocator::block_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  // Small blocks in 512-byte steps (every block stays 256-byte aligned for vector loads and
  // cuBLASLt); from 1 MiB on, 128 KiB steps, so a step's repeated activation sizes reuse blocks
  // exactly while the rounding wastes at most 1/8 of a request.
  if (bytes < (size_t{1} << 20)) return (bytes + 511) & ~size_t{511};
  return (bytes + (size_t{128} << 10) - 1) & ~((size_t{128} << 10) - 1);
}

void* DeviceCachingAllocator::take_cached(size_t n) {
  // Best fit among blocks at most 1/8 larger than the request (a larger one would strand its
  // remainder until it is freed again).
  auto it = free_blocks_.lower_bound(n);
  if (it == free_blocks_.end() || it->first > n + n / 8) return nullptr;
  void* p = it->second;
  stats_.cached_bytes -= static_cast<int64_t>(it->first);
  free_blocks_.erase(it);
  ++cache_hits_;
  return p;
}

void* DeviceCachingAllocator::allocate(size_t bytes, MemCategory cat) {
  const size_t want = block_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = take_cached(want);
  size_t n = p ? block_sizes_.at(p) : want;
  if (!p) {
    p = source_->allocate(want);
    std::string kept_for;  // why the cache was not returned, if it was not
    if (!p && !free_blocks_.empty()) {
      // Return the cache to the device and try once more (fragmented cache, different sizes),
      // unless that would wait for communication that cannot finish first.
      kept_for = release_blocked_by();
      if (kept_for.empty()) {
        ++oom_retries_;
        release_cached_locked();
        p = source_->allocate(want);
      }
    }
    if (!p) {
      size_t dev_free = 0, dev_total = 0;
      source_->mem_info(&dev_free, &dev_total);
      std::string note;
      if (!kept_for.empty())
        note = fmt::format(
            "The allocator's cache ({}) was kept, not returned to the device and retried: "
            "returning it waits for every stream, and {}.\n",
            bytes_str(stats_.cached_bytes), kept_for);
      throw OutOfMemoryError(
          fmt::format("out of memory on {}: could not allocate {} for {} ({} held by braid, "
                      "{} free of {} on the device)",
                      source_->device().str(), bytes_str(static_cast<int64_t>(want)),
                      mem_category_name(cat), bytes_str(reserved_),
                      bytes_str(static_cast<int64_t>(dev_free)),
                      bytes_str(static_cast<int64_t>(dev_total))),
          note + summary_locked());
    }
    ++device_allocs_;
    block_sizes_[p] = want;
    reserved_ += static_cast<int64_t>(want);
    if (reserved_ > peak_reserved_) peak_reserved_ = reserved_;
  }
  const auto c = static_cast<size_t>(cat);
  stats_.live_bytes[c] += static_cast<int64_t>(n);
  if (stats_.live_bytes[c] > stats_.peak_bytes[c]) stats_.peak_bytes[c] = stats_.live_bytes[c];
  stats_.live_total += static_cast<int64_t>(n);
  if (stats_.live_total > stats_.peak_total) stats_.peak_total = stats_.live_total;
  return p;
}

void DeviceCachingAllocator::deallocate(void* p, size_t, MemCategory cat) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = block_sizes_.find(p);
  BRAID_CHECK(it != block_sizes_.end(), "device free of a pointer this allocator did not hand out");
  const auto n = static_cast<int64_t>(it->second);
  stats_.live_bytes[static_cast<size_t>(cat)] -= n;
  stats_.live_total -= n;
  free_blocks_.emplace(it->second, p);
  stats_.cached_bytes += n;
}

MemoryStats DeviceCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void DeviceCachingAllocator::release_cached_locked() {
  for (auto& [n, p] : free_blocks_) {
    source_->release(p);
    block_sizes_.erase(p);
    reserved_ -= static_cast<int64_t>(n);
  }
  free_blocks_.clear();
  stats_.cached_bytes = 0;
}

void DeviceCachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked();
}

void DeviceCachingAllocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes = stats_.live_bytes;
  stats_.peak_total = stats_.live_total;
  peak_reserved_ = reserved_;
}

int64_t DeviceCachingAllocator::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

int64_t DeviceCachingAllocator::peak_reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_reserved_;
}

std::string DeviceCachingAllocator::summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  return summary_locked();
}

std::string DeviceCachingAllocator::summary_locked() const {
  std::string s =
      fmt::format("memory summary of {} (braid's allocator):\n", source_->device().str());
  s += fmt::format("  {:<16}{:>14}{:>14}{:>8}\n", "category", "live", "peak", "live%");
  const double total = static_cast<double>(stats_.live_total > 0 ? stats_.live_total : 1);
  for (int c = 0; c < kMemCategories; ++c) {
    if (stats_.peak_bytes[c] == 0 && stats_.live_bytes[c] == 0) continue;
    s += fmt::format("  {:<16}{:>14}{:>14}{:>7.1f}%\n",
                     mem_category_name(static_cast<MemCategory>(c)),
                     bytes_str(stats_.live_bytes[c]), bytes_str(stats_.peak_bytes[c]),
                     100.0 * static_cast<double>(stats_.live_bytes[c]) / total);
  }
  s += fmt::format("  {:<16}{:>14}{:>14}\n", "total", bytes_str(stats_.live_total),
                   bytes_str(stats_.peak_total));
  s += fmt::format(
      "  reserved {} (peak {}), cached {}; {} device allocations, {} reuses, {} "
      "cache flushes\n",
      bytes_str(reserved_), bytes_str(peak_reserved_), bytes_str(stats_.cached_bytes),
      device_allocs_, cache_hits_, oom_retries_);
  return s;
}

}  // namespace braid
