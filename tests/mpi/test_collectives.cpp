// Every collective with inputs whose exact result is known; each rank counts its wrong
// elements (nccl-tests style). Runs on 2, 3 and 4 ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/mpi/mpi_test_util.h"

namespace braid::test {
namespace {

const std::vector<int64_t> kSizes = {0, 1, 7, 1023, 100003};
const std::vector<DType> kFloatTypes = {DType::F32, DType::BF16, DType::F16};

// The exact reduction of known_value over all ranks of a group of n, at element i.
float expected_reduce(DType t, ReduceOp op, int n, int64_t i) {
  float sum = 0;
  for (int r = 0; r < n; ++r) sum += known_value(t, r, i);
  switch (op) {
    case ReduceOp::Sum:
      return sum;
    case ReduceOp::Max:
      return known_value(t, n - 1, i);  // increasing in rank
    case ReduceOp::Avg:
      return round_to(t, sum / static_cast<float>(n));
  }
  return NAN;
}

std::string what(const char* op, DType t, ReduceOp r, int64_t n) {
  return fmt::format("{} {} {} n={} on rank {}", op, dtype_name(t), reduce_op_name(r), n,
                     world().rank());
}

TEST(AllReduce, SumAvgMaxAllTypesOddAndEmptySizes) {
  Communicator& c = world().world();
  std::vector<DType> types = kFloatTypes;
  types.push_back(DType::I32);
  for (DType t : types)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      if (t == DType::I32 && op == ReduceOp::Avg) continue;
      for (int64_t n : kSizes) {
        Tensor x = filled(t, n, [&](int64_t i) { return known_value(t, c.rank(), i); });
        c.all_reduce(x, op).wait();
        EXPECT_EQ(count_wrong(x, [&](int64_t i) { return expected_reduce(t, op, c.size(), i); }), 0)
            << what("all_reduce", t, op, n);
      }
    }
}

// Many outstanding operations, as gradient buckets issue them: all progress, none mixes up.
TEST(AllReduce, ManyInFlightThenWaitAll) {
  Communicator& c = world().world();
  std::vector<Tensor> xs;
  std::vector<Work> works;
  for (int k = 0; k < 12; ++k) {
    DType t = kFloatTypes[static_cast<size_t>(k) % kFloatTypes.size()];
    xs.push_back(
        filled(t, 1000 + 37 * k, [&](int64_t i) { return known_value(t, c.rank(), i + k); }));
    works.push_back(c.all_reduce(xs.back(), ReduceOp::Sum));
  }
  for (size_t k = 0; k < xs.size(); ++k) {
    works[k].wait();
    EXPECT_TRUE(works[k].done());
    EXPECT_EQ(works[k].error(), "");
    DType t = xs[k].dtype();
    int kk = static_cast<int>(k);
    EXPECT_EQ(
        count_wrong(xs[k],
                    [&](int64_t i) { return expected_reduce(t, ReduceOp::Sum, c.size(), i + kk); }),
        0)
        << "bucket " << k << " on rank " << c.rank();
  }
}

TEST(ReduceScatter, SumAvgMaxOddAndEmptyChunks) {
  Communicator& c = world().world();
  for (DType t : kFloatTypes)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max})
      for (int64_t chunk : {0, 1, 5, 4099}) {
        Tensor in =
            filled(t, chunk * c.size(), [&](int64_t i) { return known_value(t, c.rank(), i); });
        Tensor out = Tensor::empty({chunk}, t);
        c.reduce_scatter(in, out, op).wait();
        int64_t base = chunk * c.rank();
        EXPECT_EQ(
            count_wrong(out, [&](int64_t i) { return expected_reduce(t, op, c.size(), base + i); }),
            0)
            << what("reduce_scatter", t, op, chunk);
      }
}

TEST(AllGather, OddAndEmptyChunks) {
  Communicator& c = world().world();
  for (DType t : {DType::F32, DType::BF16, DType::I32})
    for (int64_t chunk : {0, 1, 5, 4099}) {
      Tensor in = filled(t, chunk, [&](int64_t i) { return known_value(t, c.rank(), i); });
      Tensor out = Tensor::empty({chunk * c.size()}, t);
      c.all_gather(in, out).wait();
      EXPECT_EQ(count_wrong(out,
                            [&](int64_t j) {
                              return known_value(t,
                                                 static_cast<int>(j / std::max<int64_t>(chunk, 1)),
                                                 j % std::max<int64_t>(chunk, 1));
                            }),
                0)
          << what("all_gather", t, ReduceOp::Sum, chunk);
    }
}

TEST(Broadcast, EveryRootEveryType) {
  Communicator& c = world().world();
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I32})
    for (int root = 0; root < c.size(); ++root)
      for (int64_t n : {int64_t{0}, int64_t{3}, int64_t{10007}}) {
        Tensor x = filled(t, n, [&](int64_t i) { return known_value(t, c.rank(), i); });
        c.broadcast(x, root).wait();
        EXPECT_EQ(count_wrong(x, [&](int64_t i) { return known_value(t, root, i); }), 0)
            << "broadcast root " << root << " " << dtype_name(t) << " n=" << n << " rank "
            << c.rank();
      }
}

// A ring: each rank sends to the next and receives from the previous; two tags posted in
// opposite orders on the two sides must still match by tag.
TEST(SendRecv, RingWithTags) {
  Communicator& c = world().world();
  int next = (c.rank() + 1) % c.size(), prev = (c.rank() + c.size() - 1) % c.size();
  for (DType t : {DType::F32, DType::BF16})
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{65537}}) {
      Tensor a = filled(t, n, [&](int64_t i) { return known_value(t, c.rank(), i); });
      Tensor b = filled(t, n + 1, [&](int64_t i) { return known_value(t, c.rank(), i + 3); });
      Tensor ra = Tensor::empty({n}, t), rb = Tensor::empty({n + 1}, t);
      Work wrb = c.recv(rb, prev, 2);
      Work wra = c.recv(ra, prev, 1);
      Work wa = c.send(a, next, 1);
      Work wb = c.send(b, next, 2);
      for (Work* w : {&wrb, &wra, &wa, &wb}) w->wait();
      EXPECT_EQ(count_wrong(ra, [&](int64_t i) { return known_value(t, prev, i); }), 0)
          << "tag 1 rank " << c.rank();
      EXPECT_EQ(count_wrong(rb, [&](int64_t i) { return known_value(t, prev, i + 3); }), 0)
          << "tag 2 rank " << c.rank();
    }
}

// done() is false while the peer has not sent; true after wait().
TEST(SendRecv, WorkIsNotDoneBeforeThePeerSends) {
  Communicator& c = world().world();
  Tensor x = Tensor::zeros({16});
  Work w;
  if (c.rank() == 1) {
    w = c.recv(x, 0, 7);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(w.done());
  }
  c.barrier().wait();  // rank 0 sends only after rank 1 has looked
  if (c.rank() == 0)
    c.send(filled(DType::F32, 16, [](int64_t i) { return float(i); }), 1, 7).wait();
  if (c.rank() == 1) {
    w.wait();
    EXPECT_TRUE(w.done());
    EXPECT_EQ(count_wrong(x, [](int64_t i) { return float(i); }), 0);
  }
}

TEST(Barrier, WaitsForTheLastRank) {
  Communicator& c = world().world();
  auto t0 = std::chrono::steady_clock::now();
  if (c.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  c.barrier().wait();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 0.25) << "rank " << c.rank();
}

TEST(Collectives, BadArgumentsThrowOnEveryRank) {
  Communicator& c = world().world();
  EXPECT_THROW(c.all_reduce(Tensor::from_vector_i32({1, 2}, {2}), ReduceOp::Avg), Error);
  EXPECT_THROW(
      c.reduce_scatter(Tensor::zeros({c.size() * 2 + 1}), Tensor::zeros({2}), ReduceOp::Sum),
      Error);
  EXPECT_THROW(c.all_gather(Tensor::zeros({2}), Tensor::empty({2 * c.size()}, DType::BF16)), Error);
  EXPECT_THROW(c.broadcast(Tensor::zeros({2}), c.size()), Error);
  EXPECT_THROW(c.send(Tensor::zeros({2}), c.rank()), Error);
  EXPECT_THROW(c.all_reduce(Tensor(), ReduceOp::Sum), Error);
  c.barrier().wait();  // still in step: nothing was issued
}

}  // namespace
}  // namespace braid::test
