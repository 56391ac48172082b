// SelfCommunicator: every collective over a group of one leaves the bits as they are (sums,
// averages and maxima of one value, signed zeros, NaNs, 16-bit values), reduce_scatter and
// all_gather copy, transfers to a peer are refused, and the scalar helpers the trainer uses
// (all_sum_doubles, all_max_ints, gather_strings) return this rank's own values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "parallel/parallel_dims.h"
#include "parallel/scalar_reduce.h"
#include "parallel/self_communicator.h"

namespace braid {
namespace {

// Values whose bits an arithmetic identity could change: signed zero, NaN, denormal, large.
Tensor tricky_f32() {
  const std::vector<float> v = {-0.0f,
                                1.5f,
                                std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::denorm_min(),
                                -3.0e38f,
                                1e-7f};
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::F32);
  std::memcpy(t.raw(), v.data(), v.size() * sizeof(float));
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

Tensor as(DType dt, const Tensor& f32) {
  Tensor t = Tensor::empty({f32.numel()}, dt);
  for (int64_t i = 0; i < f32.numel(); ++i) {
    const float x = f32.data<float>()[i];
    if (dt == DType::F32) t.data<float>()[i] = x;
    if (dt == DType::BF16) t.data<bf16>()[i] = float_to_bf16(x);
    if (dt == DType::F16) t.data<f16>()[i] = float_to_f16(x);
    if (dt == DType::I32) t.data<int32_t>()[i] = static_cast<int32_t>(i * 7 - 11);
  }
  return t;
}

TEST(SelfCommunicator, IsAGroupOfOne) {
  SelfCommunicator c("dp", 5);
  EXPECT_EQ(c.size(), 1);
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.world_ranks(), std::vector<int>{5});
  EXPECT_EQ(c.name(), "dp");
}

TEST(SelfCommunicator, AllReduceKeepsEveryBit) {
  SelfCommunicator c("self");
  for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::I32}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      if (dt == DType::I32 && op == ReduceOp::Avg) continue;
      Tensor t = as(dt, tricky_f32());
      const Tensor before = t.clone();
      Work w = c.all_reduce(t, op);
      EXPECT_TRUE(w.done());
      w.wait();
      EXPECT_TRUE(same_bits(t, before)) << dtype_name(dt) << " " << reduce_op_name(op);
    }
  }
  EXPECT_THROW(c.all_reduce(as(DType::I32, tricky_f32()), ReduceOp::Avg), Error);
}

TEST(SelfCommunicator, ReduceScatterAndAllGatherCopy) {
  SelfCommunicator c("self");
  for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::I32}) {
    const Tensor in = as(dt, tricky_f32());
    Tensor out = Tensor::zeros({in.numel()}, dt);
    c.reduce_scatter(in, out, ReduceOp::Sum).wait();
    EXPECT_TRUE(same_bits(out, in)) << dtype_name(dt);
    Tensor gathered = Tensor::zeros({in.numel()}, dt);
    c.all_gather(in, gathered).wait();
    EXPECT_TRUE(same_bits(gathered, in)) << dtype_name(dt);
    c.all_gather(gathered, gathered).wait();  // in place: nothing to move
    EXPECT_TRUE(same_bits(gathered, in)) << dtype_name(dt);
  }
  Tensor small = Tensor::zeros({2}, DType::F32);
  EXPECT_THROW(c.reduce_scatter(tricky_f32(), small, ReduceOp::Sum), Error);
  EXPECT_THROW(c.all_gather(tricky_f32(), small), Error);
  EXPECT_THROW(c.all_gather(tricky_f32(), as(DType::BF16, tricky_f32())), Error);
}

TEST(SelfCommunicator, BroadcastBarrierAndNoPeers) {
  SelfCommunicator c("pp");
  Tensor t = tricky_f32();
  const Tensor before = t.clone();
  c.broadcast(t, 0).wait();
  EXPECT_TRUE(same_bits(t, before));
  EXPECT_THROW(c.broadcast(t, 1), Error);
  EXPECT_TRUE(c.barrier().done());
  EXPECT_THROW(c.send(t, 0), Error);
  EXPECT_THROW(c.recv(t, 0), Error);
}

TEST(SelfCommunicator, ScalarHelpersReturnTheRanksOwnValues) {
  SelfCommunicator c("world");
  const std::vector<double> d = {-0.0, 0.1, 1e300, std::nan("")};
  const std::vector<double> s = all_sum_doubles(c, d);
  ASSERT_EQ(s.size(), d.size());
  EXPECT_EQ(std::memcmp(s.data(), d.data(), d.size() * sizeof(double)), 0);
  EXPECT_EQ(all_max_ints(c, {3, -1, 0}), (std::vector<int>{3, -1, 0}));
  EXPECT_EQ(gather_strings(c, "{\"a\": 1}"), std::vector<std::string>{"{\"a\": 1}"});
}

// A one-process run holds every group a multi-rank one does, each its own group of one.
TEST(ParallelDims, OneProcessHasAGroupOfOneForEveryDimension) {
  const ParallelDims d = ParallelDims::single(/*sequence_parallel=*/true);
  EXPECT_EQ(d.world_size(), 1);
  EXPECT_TRUE(d.lead());
  EXPECT_EQ(d.dp_size() * d.tp_size() * d.pp_size() * d.sp_size(), 1);
  EXPECT_EQ(d.coord(), MeshCoord{});
  EXPECT_EQ(d.str(), "one process");
  ASSERT_NE(d.embedding(), nullptr);
  const std::vector<Communicator*> groups = {&d.world(), &d.dp(), &d.tp(), &d.pp(), d.embedding()};
  for (size_t i = 0; i < groups.size(); ++i) {
    EXPECT_EQ(groups[i]->size(), 1);
    EXPECT_EQ(groups[i]->rank(), 0);
    for (size_t j = 0; j < i; ++j) EXPECT_NE(groups[i], groups[j]);
  }
  EXPECT_EQ(d.dp().name(), "dp");
}

}  // namespace
}  // namespace braid
