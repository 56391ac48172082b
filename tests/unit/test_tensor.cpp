// Tensor basics: shapes, views, slices, dtype conversions, the caching allocator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "core/tensor.h"

namespace braid {

TEST(Tensor, ViewAndSliceShareStorage) {
  Tensor t = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor v = t.view({2, -1});
  EXPECT_EQ(v.shape(), (Shape{2, 3}));
  Tensor s = t.slice0(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_FLOAT_EQ(s.f32()[0], 2.0f);
  s.f32()[0] = 42.0f;
  EXPECT_FLOAT_EQ(t.f32()[2], 42.0f);
  EXPECT_THROW(t.view({4, 2}), Error);
  EXPECT_THROW(t.slice0(2, 4), Error);
  EXPECT_THROW(t.i32(), Error);
}

TEST(Tensor, CloneIsDeep) {
  Tensor t = Tensor::from_vector({1, 2}, {2});
  Tensor c = t.clone();
  c.f32()[0] = 9;
  EXPECT_FLOAT_EQ(t.f32()[0], 1.0f);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3f80);
  EXPECT_FLOAT_EQ(bf16_to_float(float_to_bf16(3.140625f)), 3.140625f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to even (1.0).
  EXPECT_FLOAT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

TEST(DType, F16RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f})
    EXPECT_FLOAT_EQ(f16_to_float(float_to_f16(f)), f) << f;
  EXPECT_TRUE(std::isinf(f16_to_float(float_to_f16(1e6f))));
  EXPECT_EQ(float_to_f16(1.0f).bits, 0x3c00);
}

TEST(Memory, CachingAllocatorCountsAndReuses) {
  auto alloc = std::make_shared<CachingHostAllocator>();
  const auto grads = static_cast<size_t>(MemCategory::Grads);
  void* p = nullptr;
  {
    Tensor t = Tensor::empty(alloc, {1000}, DType::F32, MemCategory::Grads);
    p = t.raw();
    EXPECT_EQ(alloc->stats().live_bytes[grads], 4032);  // rounded to 64 bytes
    Tensor w = t.new_empty({10}, DType::F32, MemCategory::Weights);  // same allocator
    EXPECT_EQ(alloc->stats().live_bytes[static_cast<size_t>(MemCategory::Weights)], 64);
  }
  EXPECT_EQ(alloc->stats().live_bytes[grads], 0);
  EXPECT_EQ(alloc->stats().peak_bytes[grads], 4032);
  Tensor u = Tensor::empty(alloc, {1000}, DType::F32, MemCategory::Grads);
  EXPECT_EQ(u.raw(), p);  // the freed block came back
  alloc->reset_peaks();
  EXPECT_EQ(alloc->stats().peak_bytes[grads], 4032);  // u is live
  u = Tensor();
  EXPECT_EQ(alloc->stats().peak_total, 4032);
}

#ifdef __linux__
// The VmFlags line of the mapping that holds `p` in /proc/self/smaps ("" if none does).
std::string vm_flags_of(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = addr >= lo && addr < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// Blocks of 2 MiB and more from a Huge allocator start on a 2 MiB boundary and their mapping is
// advised for transparent huge pages ("hg" in VmFlags); smaller blocks, and every block of a
// Small allocator, are not.
TEST(Memory, LargeBlocksAreAdvisedAsHugePages) {
  // A kernel built without transparent huge pages refuses the advice (the block still works).
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"))
    GTEST_SKIP() << "this kernel has no transparent huge pages "
                    "(/sys/kernel/mm/transparent_hugepage/enabled is missing)";
  auto huge = std::make_shared<CachingHostAllocator>(HostPages::Huge);
  auto small = std::make_shared<CachingHostAllocator>(HostPages::Small);
  const int64_t big = 3 * (int64_t{1} << 20) / 4;  // 3 MiB of f32
  Tensor a = Tensor::empty(huge, {big}, DType::F32, MemCategory::Activations);
  Tensor b = Tensor::empty(small, {big}, DType::F32, MemCategory::Activations);
  Tensor c = Tensor::empty(huge, {1000}, DType::F32, MemCategory::Activations);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw()) % kHugePageBytes, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c.raw()) % 64, 0u);
  const auto advised = [](const Tensor& t) {
    std::istringstream flags(vm_flags_of(t.raw()));
    for (std::string f; flags >> f;)
      if (f == "hg") return true;
    return false;
  };
  EXPECT_TRUE(advised(a)) << vm_flags_of(a.raw());
  EXPECT_FALSE(advised(b)) << vm_flags_of(b.raw());
  EXPECT_FALSE(advised(c)) << vm_flags_of(c.raw());
  // The block is ordinary memory: written end to end and reused from the cache.
  a.fill_(1.0f);
  EXPECT_EQ(a.f32()[big - 1], 1.0f);
  void* p = a.raw();
  a = Tensor();
  EXPECT_EQ(Tensor::empty(huge, {big}, DType::F32, MemCategory::Activations).raw(), p);
}
#endif

// Tensors made outside a context come from the plain allocator and are not counted anywhere;
// two allocators never share blocks or counters.
TEST(Memory, AllocatorsAreIndependent) {
  auto a = std::make_shared<CachingHostAllocator>(), b = std::make_shared<CachingHostAllocator>();
  Tensor x = Tensor::empty(a, {256}, DType::F32, MemCategory::Activations);
  Tensor plain = Tensor::empty({256});
  EXPECT_EQ(plain.allocator(), plain_host_allocator());
  EXPECT_EQ(b->stats().live_total, 0);
  EXPECT_EQ(a->stats().live_total, 1024);
  Tensor y = empty_like(x);
  EXPECT_EQ(y.allocator(), a);
  EXPECT_EQ(a->stats().live_total, 2048);
  EXPECT_EQ(plain_host_allocator()->stats().live_total, 0);
}

}  // namespace braid
