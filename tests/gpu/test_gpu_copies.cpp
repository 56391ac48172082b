// CUDA sequence-parallel reorders and shard copies against the CPU kernels, byte for byte, in
// every dtype (i32 too): odd sizes, several ranges in any order, the rest of `whole` untouched.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/kernels/seq_reorder.h"
#include "core/kernels/shard_copy.h"
#include "core/safetensors.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

// Distinct bytes in every element (pure copies: any pattern is a valid value).
Tensor patterned(const Shape& shape, DType dtype, int seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = static_cast<unsigned char>(i * 131 + static_cast<size_t>(seed) * 17 + 7);
  return t;
}

bool same_bits(const Tensor& device, const Tensor& host) {
  const Tensor h = device.to_host();
  return h.nbytes() == host.nbytes() && std::memcmp(h.raw(), host.raw(), h.nbytes()) == 0;
}

class GpuCopies : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuCopies, SeqReordersMatchCpu) {
  const DType dt = GetParam();
  for (const Shape& sh : {Shape{1, 6}, Shape{3, 6, 5}, Shape{2, 12, 257}, Shape{5, 30, 3, 7}})
    for (int n : {1, 2, 3, 6}) {
      const std::string at = shape_str(sh) + " n=" + std::to_string(n);
      const Tensor seq = patterned(sh, dt, n);
      Tensor blocks_c = patterned({shape_numel(sh)}, dt, 50);
      seq_to_blocks(cpu(), blocks_c, seq, n);
      Tensor blocks = up(patterned({shape_numel(sh)}, dt, 51));
      seq_to_blocks(gpu(), blocks, up(seq), n);
      EXPECT_TRUE(same_bits(blocks, blocks_c)) << "seq_to_blocks " << at;
      Tensor back = up(patterned(sh, dt, 52));
      blocks_to_seq(gpu(), back, blocks, n);
      EXPECT_TRUE(same_bits(back, seq)) << "blocks_to_seq " << at;
    }
}

TEST_P(GpuCopies, RangeCopiesMatchCpu) {
  const DType dt = GetParam();
  struct Case {
    Shape whole;
    int dim;
    IndexRanges ranges;
  };
  const Case cases[] = {{{10}, 0, {{2, 5}}},
                        {{31, 7}, 0, {{0, 3}, {20, 31}, {5, 6}}},
                        {{9, 4097}, 1, {{4000, 4097}, {0, 1}, {1024, 2048}}},
                        {{3, 12, 5}, 1, {{0, 4}, {8, 12}}},
                        {{4, 6, 257}, 2, {{256, 257}, {0, 128}}}};
  for (const Case& c : cases) {
    const std::string at = shape_str(c.whole) + " dim=" + std::to_string(c.dim);
    int64_t part_d = 0;
    for (auto [b, e] : c.ranges) part_d += e - b;
    Shape part_shape = c.whole;
    part_shape[static_cast<size_t>(c.dim)] = part_d;
    const Tensor whole = patterned(c.whole, dt, 1);
    Tensor part_c = patterned(part_shape, dt, 2);
    extract_ranges(cpu(), part_c, whole, c.dim, c.ranges);
    Tensor part = up(patterned(part_shape, dt, 3));
    extract_ranges(gpu(), part, up(whole), c.dim, c.ranges);
    EXPECT_TRUE(same_bits(part, part_c)) << "extract " << at;

    const Tensor other = patterned(c.whole, dt, 4);  // the rest must stay as it was
    Tensor whole_c = other.clone();
    insert_ranges(cpu(), whole_c, part_c, c.dim, c.ranges);
    Tensor gwhole = up(other);
    insert_ranges(gpu(), gwhole, part, c.dim, c.ranges);
    EXPECT_TRUE(same_bits(gwhole, whole_c)) << "insert " << at;
  }
  Tensor bad = up(patterned({2, 3}, dt, 5)), w = up(patterned({4, 3}, dt, 6));
  EXPECT_THROW(extract_ranges(gpu(), bad, w, 0, {{3, 5}}), std::runtime_error);
}

// Host -> device uploads (ExecContext::to_device) through the pinned ring: more uploads than
// slots, growing sizes (slots reallocated), one above the staging limit, the host buffers
// overwritten right after each call (the copy must not read them late), all read back exact.
class GpuUpload : public GpuTest {};

TEST_F(GpuUpload, PinnedRingCopiesExactlyAndNeverReadsTheSourceLate) {
  ExecContext& g = gpu();
  std::vector<Tensor> device, expected;
  for (int i = 0; i < 21; ++i) {
    const int64_t n = i == 20 ? (int64_t{5} << 20) / 4 : 1 + 997 * i * i;
    Tensor host = patterned({n}, DType::I32, i);
    expected.push_back(host.clone());
    device.push_back(g.to_device(host));
    std::memset(host.raw(), 0xff, host.nbytes());  // reused by the loader at once
  }
  for (size_t i = 0; i < device.size(); ++i)
    EXPECT_TRUE(same_bits(device[i], expected[i])) << "upload " << i;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuCopies,
                         ::testing::Values(DType::F32, DType::BF16, DType::F16, DType::I32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A GPU run's checkpoint: device tensors (and a zeroed one) are written to a safetensors file
// through host memory and read back with the same bytes.
TEST_F(GpuTest, SafetensorsFromDeviceTensors) {
  const Tensor a = patterned({3, 5}, DType::F32, 1), b = patterned({7}, DType::BF16, 2);
  Tensor z = up(patterned({4, 4}, DType::F32, 3));
  z.zero_();
  const std::string path = ::testing::TempDir() + "braid_gpu_safetensors.safetensors";
  save_safetensors(path, {{"a", up(a)}, {"b", up(b)}, {"z", z}});
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_TRUE(same_bits(up(f.get("a")), a));
  EXPECT_TRUE(same_bits(up(f.get("b")), b));
  EXPECT_TRUE(same_bits(up(f.get("z")), Tensor::zeros({4, 4})));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace braid::gpu_test
