// The device caching allocator on a fake device of fixed capacity: block reuse, per-category
// statistics, the cache returned to the device before giving up, and the out-of-memory report
// (what was allocated, the tensor, the summary by category, what to change).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/context.h"
#include "core/device_memory.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/runtime.h"
#include "core/tensor.h"

namespace braid {
namespace {

// Host memory posing as a GPU of `capacity` bytes; counts calls.
class FakeDevice final : public DeviceMemorySource {
 public:
  explicit FakeDevice(size_t capacity, int* allocs = nullptr, int* releases = nullptr)
      : capacity_(capacity), allocs_(allocs), releases_(releases) {}
  ~FakeDevice() override {
    for (auto& [p, n] : live_) std::free(p);
  }
  Device device() const override { return Device::cuda(3); }
  void* allocate(size_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    void* p = std::aligned_alloc(512, (bytes + 511) & ~size_t{511});
    live_[p] = bytes;
    used_ += bytes;
    if (allocs_) ++*allocs_;
    return p;
  }
  void release(void* p) override {
    used_ -= live_.at(p);
    live_.erase(p);
    std::free(p);
    if (releases_) ++*releases_;
  }
  void mem_info(size_t* free_bytes, size_t* total_bytes) const override {
    *free_bytes = capacity_ - used_;
    *total_bytes = capacity_;
  }

 private:
  size_t capacity_, used_ = 0;
  int* allocs_;
  int* releases_;
  std::map<void*, size_t> live_;
};

constexpr size_t kMiB = size_t{1} << 20;

TEST(DeviceMemory, BlocksAreReusedAndCountedByCategory) {
  int allocs = 0, releases = 0;
  DeviceCachingAllocator a(std::make_unique<FakeDevice>(64 * kMiB, &allocs, &releases));
  EXPECT_EQ(a.device(), Device::cuda(3));
  void* w = a.allocate(3 * kMiB, MemCategory::Weights);
  void* x = a.allocate(1000, MemCategory::Activations);
  EXPECT_EQ(allocs, 2);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.live_bytes[static_cast<int>(MemCategory::Weights)], 3 * static_cast<int64_t>(kMiB));
  EXPECT_EQ(s.live_bytes[static_cast<int>(MemCategory::Activations)], 1024);  // 512-byte steps
  a.deallocate(x, 1000, MemCategory::Activations);
  void* y = a.allocate(900, MemCategory::Activations);  // same block size: the cached block
  EXPECT_EQ(y, x);
  EXPECT_EQ(allocs, 2);
  a.deallocate(y, 900, MemCategory::Activations);
  // A much smaller request does not take a large block (it would strand the rest).
  void* z = a.allocate(100, MemCategory::Activations);
  EXPECT_NE(z, w);
  EXPECT_EQ(allocs, 3);
  s = a.stats();
  EXPECT_EQ(s.peak_bytes[static_cast<int>(MemCategory::Activations)], 1024);
  EXPECT_EQ(s.cached_bytes, 1024);
  EXPECT_EQ(a.reserved_bytes(), static_cast<int64_t>(3 * kMiB + 1024 + 512));
  a.deallocate(z, 100, MemCategory::Activations);
  a.deallocate(w, 3 * kMiB, MemCategory::Weights);
  a.release_cached();
  EXPECT_EQ(releases, 3);
  EXPECT_EQ(a.reserved_bytes(), 0);
  EXPECT_EQ(a.stats().live_total, 0);
}

TEST(DeviceMemory, CacheIsReturnedToTheDeviceBeforeGivingUp) {
  int allocs = 0, releases = 0;
  DeviceCachingAllocator a(std::make_unique<FakeDevice>(10 * kMiB, &allocs, &releases));
  void* p = a.allocate(6 * kMiB, MemCategory::Activations);
  a.deallocate(p, 6 * kMiB, MemCategory::Activations);       // cached, still held from the device
  void* q = a.allocate(8 * kMiB, MemCategory::Activations);  // fits only once the cache is freed
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(releases, 1);
  EXPECT_EQ(a.stats().cached_bytes, 0);
  a.deallocate(q, 8 * kMiB, MemCategory::Activations);
}

// Returning the cache waits for every stream of the device: with communication in flight that
// cannot finish first, the guard says so and the allocation fails as out of memory instead.
TEST(DeviceMemory, CacheIsKeptWhileTheReleaseGuardReportsCommunicationInFlight) {
  int allocs = 0, releases = 0, asked = 0;
  DeviceCachingAllocator a(std::make_unique<FakeDevice>(10 * kMiB, &allocs, &releases));
  std::string in_flight = "recv(x) from group rank 1 had not finished after 30 s";
  const DeviceReleaseGuard before = set_device_release_guard([&] {
    ++asked;
    return in_flight;
  });
  void* p = a.allocate(6 * kMiB, MemCategory::Activations);
  a.deallocate(p, 6 * kMiB, MemCategory::Activations);
  try {
    a.allocate(8 * kMiB, MemCategory::Activations);
    FAIL() << "allocated by returning the cache while communication was in flight";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("out of memory on cuda:3: could not allocate 8.0 MiB for activations"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("The allocator's cache (6.0 MiB) was kept, not returned to the device and "
                     "retried: returning it waits for every stream, and recv(x) from group rank "
                     "1 had not finished after 30 s."),
              std::string::npos)
        << m;
  }
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(releases, 0);
  EXPECT_EQ(a.stats().cached_bytes, static_cast<int64_t>(6 * kMiB));
  // Once the communication has finished, the retry returns the cache as before.
  in_flight.clear();
  void* q = a.allocate(8 * kMiB, MemCategory::Activations);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(releases, 1);
  a.deallocate(q, 8 * kMiB, MemCategory::Activations);
  // An allocation the device holds at once never asks.
  void* r = a.allocate(kMiB, MemCategory::Activations);
  EXPECT_EQ(asked, 2);
  a.deallocate(r, kMiB, MemCategory::Activations);
  set_device_release_guard(before);
}

TEST(DeviceMemory, OutOfMemoryNamesTheAllocationTheTensorAndWhatToChange) {
  auto alloc = std::make_shared<DeviceCachingAllocator>(std::make_unique<FakeDevice>(16 * kMiB));
  Tensor w = Tensor::empty(alloc, {1024, 1024}, DType::F32, MemCategory::Weights);  // 4 MiB
  Tensor g = Tensor::empty(alloc, {1024, 1024}, DType::F32, MemCategory::Grads);    // 4 MiB
  try {
    Tensor big = Tensor::empty(alloc, {2, 1024, 768}, DType::BF16, MemCategory::Activations);
    (void)big;
    Tensor bigger = Tensor::empty(alloc, {4, 1024, 1024}, DType::F32, MemCategory::Activations);
    FAIL() << "16 MiB more should not fit a 16 MiB device holding 8 MiB";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("out of memory on cuda:3"), std::string::npos) << m;
    EXPECT_NE(m.find("16.0 MiB for activations"), std::string::npos) << m;
    EXPECT_NE(m.find("for tensor f32[4, 1024, 1024]"), std::string::npos) << m;
    EXPECT_NE(m.find("weights"), std::string::npos) << m;
    EXPECT_NE(m.find("grads"), std::string::npos) << m;
    EXPECT_NE(m.find("data.micro_batch"), std::string::npos) << m;
    EXPECT_NE(m.find("train.checkpointing"), std::string::npos) << m;
    EXPECT_NE(m.find("parallel.tp"), std::string::npos) << m;
  }
  // The failed allocation changed nothing: the live tensors are still counted.
  EXPECT_EQ(alloc->stats().live_bytes[static_cast<int>(MemCategory::Weights)],
            4 * static_cast<int64_t>(kMiB));
}

TEST(DeviceMemory, SummaryListsCategoriesWithLiveAndPeak) {
  DeviceCachingAllocator a(std::make_unique<FakeDevice>(64 * kMiB));
  void* p = a.allocate(2 * kMiB, MemCategory::OptimizerState);
  void* q = a.allocate(5 * kMiB, MemCategory::Activations);
  a.deallocate(q, 5 * kMiB, MemCategory::Activations);
  const std::string s = a.summary();
  EXPECT_NE(s.find("optimizer"), std::string::npos) << s;
  EXPECT_NE(s.find("2.0 MiB"), std::string::npos) << s;
  EXPECT_NE(s.find("activations"), std::string::npos) << s;
  EXPECT_NE(s.find("5.0 MiB"), std::string::npos) << s;  // the peak survives the free
  EXPECT_NE(s.find("cached 5.0 MiB"), std::string::npos) << s;
  a.deallocate(p, 2 * kMiB, MemCategory::OptimizerState);
}

// Without a GPU (or without the backend) a CUDA context is refused with the reason.
TEST(DeviceMemory, CudaContextWithoutAGpuIsAClearError) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is visible here";
  ExecOptions o;
  o.device = Device::cuda(0);
  try {
    ExecContext ctx(o);
    FAIL() << "a CUDA context without a GPU";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run on cuda:0"), std::string::npos) << e.what();
  }
}

// device: auto counts the ops without a CUDA kernel from pending.cpp's list: the list must name
// exactly the stubs there, or auto would pick a GPU that fails at the first missing kernel.
TEST(DeviceMemory, PendingListNamesExactlyTheStubs) {
  std::ifstream in(std::string(BRAID_SOURCE_DIR) + "/core/kernels/cuda/pending.cpp");
  ASSERT_TRUE(in) << "core/kernels/cuda/pending.cpp";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string src = ss.str();
  std::set<std::string> stubs, listed;
  const std::regex call(R"re(pending\("([a-z_0-9]+)"\))re");
  for (auto it = std::sregex_iterator(src.begin(), src.end(), call); it != std::sregex_iterator();
       ++it)
    stubs.insert((*it)[1]);
  const size_t begin = src.find("kPendingOps = {"), end = src.find("};", begin);
  ASSERT_NE(begin, std::string::npos);
  const std::string list = src.substr(begin, end - begin);
  const std::regex name(R"re("([a-z_0-9]+)")re");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), name); it != std::sregex_iterator();
       ++it)
    listed.insert((*it)[1]);
  EXPECT_EQ(stubs, listed);
#if BRAID_WITH_CUDA
  EXPECT_EQ(cuda::pending_kernel_count(), static_cast<int>(listed.size()));
#else
  EXPECT_EQ(cuda::pending_kernel_count(), -1);
#endif
}

}  // namespace
}  // namespace braid
