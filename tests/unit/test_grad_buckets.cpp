// GradBuckets in one process against a fake Communicator that records every call: grouping in
// reverse order of use, the small first bucket, frozen parameters, bound gradients, start as
// soon as a bucket is complete and only on the step's last micro-batch, issue order, 16-bit
// all-reduce and reduce-scatter.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/models/transformer.h"
#include "model_test_util.h"
#include "parallel/grad_buckets.h"
#include "parallel/self_communicator.h"

namespace braid {
namespace {

// Pretends to be rank `rank` of `size` ranks that all hold the same data: a sum is then
// size * x, an average x. Records each call and how many grad-ready reports preceded it.
class FakeComm final : public Communicator {
 public:
  struct Call {
    std::string op;
    int64_t numel;
    DType dtype;
    int reports_before;
  };
  FakeComm(int rank, int size) : Communicator("fake", ranks(size), rank, 10.0) {}
  std::vector<Call> calls;
  int reports = 0;  // the test bumps this around each grad_ready

  Work all_reduce(Tensor t, ReduceOp op) override {
    calls.push_back({"all_reduce", t.numel(), t.dtype(), reports});
    scale(t, op == ReduceOp::Sum ? size() : 1);
    return Work::completed();
  }
  Work reduce_scatter(Tensor in, Tensor out, ReduceOp op) override {
    calls.push_back({"reduce_scatter", in.numel(), in.dtype(), reports});
    EXPECT_EQ(in.numel(), out.numel() * size());
    out.copy_from(in.slice0(out.numel() * rank(), out.numel() * (rank() + 1)));
    scale(out, op == ReduceOp::Sum ? size() : 1);
    return Work::completed();
  }
  Work all_gather(Tensor, Tensor) override { return fail("all_gather"); }
  Work broadcast(Tensor, int) override { return fail("broadcast"); }
  Work send(Tensor, int, int) override { return fail("send"); }
  Work recv(Tensor, int, int) override { return fail("recv"); }
  Work barrier() override { return fail("barrier"); }

 private:
  static std::vector<int> ranks(int n) {
    std::vector<int> r(n);
    for (int i = 0; i < n; ++i) r[i] = i;
    return r;
  }
  static void scale(Tensor& t, int s) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype() == DType::F32) t.data<float>()[i] *= s;
      if (t.dtype() == DType::BF16)
        t.data<bf16>()[i] = float_to_bf16(bf16_to_float(t.data<bf16>()[i]) * s);
    }
  }
  Work fail(const char* what) {
    ADD_FAILURE() << "GradBuckets called " << what;
    return Work::completed();
  }
};

struct Params {
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<Parameter*> ptrs;  // order of first use
  Parameter& add(ExecContext& ctx, const std::string& name, int64_t n) {
    owned.push_back(std::make_unique<Parameter>(name, ctx.zeros({n})));
    ptrs.push_back(owned.back().get());
    return *owned.back();
  }
};

// "p<i>" (built with append: GCC 12 warns falsely on "p" + std::to_string(i)).
std::string pname(int i) {
  std::string s = std::to_string(i);
  s.insert(s.begin(), 'p');
  return s;
}

// n parameters of 10 elements, one a bucket (40-byte caps), on a fake group of two.
struct OneParamABucket {
  ExecContext ctx;
  Params ps;
  FakeComm comm{0, 2};
  GradBucketOptions o;
  explicit OneParamABucket(int n) {
    for (int i = 0; i < n; ++i) ps.add(ctx, pname(i), 10);
    o.first_bucket_bytes = 40;
    o.bucket_bytes = 40;
  }
};

std::vector<std::vector<std::string>> names(const GradBuckets& gb) {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : gb.buckets()) {
    out.emplace_back();
    for (const auto& s : b.slots) out.back().push_back(s.param->name);
  }
  return out;
}

TEST(GradBuckets, GroupsInReverseOrderWithSmallFirstBucketAndSkipsFrozen) {
  ExecContext ctx;
  Params ps;
  // Order of use: a b c d e f; 4 bytes per element.
  ps.add(ctx, "a", 100);
  ps.add(ctx, "b", 300);
  ps.add(ctx, "frozen", 50).freeze();
  ps.add(ctx, "c", 200);
  ps.add(ctx, "d", 60);
  ps.add(ctx, "e", 40);
  ps.add(ctx, "f", 30);
  FakeComm comm(0, 2);
  GradBucketOptions o;
  o.first_bucket_bytes = 400;  // 100 elements
  o.bucket_bytes = 1200;       // 300 elements
  GradBuckets gb(ctx, ps.ptrs, comm, o);
  // f+e = 70 elements fit the first bucket, d would overflow it; d+c = 260 fit a full one; b
  // alone is 300; a starts the last. Frozen appears nowhere.
  const std::vector<std::vector<std::string>> want = {{"f", "e"}, {"d", "c"}, {"b"}, {"a"}};
  EXPECT_EQ(names(gb), want);
  // Every gradient is a view into its bucket's flat buffer, at its slot offset.
  for (const auto& b : gb.buckets()) {
    EXPECT_EQ(b.flat.dtype(), DType::F32);
    for (const auto& s : b.slots) {
      Tensor& g = s.param->grad();
      EXPECT_TRUE(g.same_storage(b.flat)) << s.param->name;
      EXPECT_EQ(g.data<float>(), b.flat.data<float>() + s.offset) << s.param->name;
    }
  }
  EXPECT_FALSE(ps.ptrs[2]->has_grad());
  // One block per bucket (the allocator rounds each up to 64 bytes): no per-parameter buffers.
  const int64_t grads = ctx.allocator().stats().live_bytes[static_cast<int>(MemCategory::Grads)];
  EXPECT_GE(grads, 4 * (100 + 300 + 200 + 60 + 40 + 30));
  EXPECT_LT(grads, 4 * (100 + 300 + 200 + 60 + 40 + 30) + 4 * 64);
}

TEST(GradBuckets, StartsEachBucketWhenCompleteOnlyInTheLastMicroBatch) {
  ExecContext ctx;
  Params ps;
  for (int i = 0; i < 6; ++i) ps.add(ctx, pname(i), 50);
  FakeComm comm(0, 2);
  GradBucketOptions o;
  o.first_bucket_bytes = 200;  // one parameter
  o.bucket_bytes = 400;        // two
  GradBuckets gb(ctx, ps.ptrs, comm, o);
  ASSERT_EQ(gb.buckets().size(), 4u);  // {p5} {p4 p3} {p2 p1} {p0}
  gb.begin_step(3);
  auto run_micro = [&](bool) {
    MicroBatch mb(ctx);
    gb.attach(mb);
    for (int i = 5; i >= 0; --i) {
      ps.ptrs[i]->grad().fill_(1.0f + static_cast<float>(i));
      mb.grad_ready(*ps.ptrs[i]);
      ++comm.reports;
    }
  };
  run_micro(false);
  run_micro(false);
  EXPECT_TRUE(comm.calls.empty()) << "an accumulation micro-batch communicated";
  comm.reports = 0;
  run_micro(true);
  gb.finish();
  ASSERT_EQ(comm.calls.size(), 4u);
  // Each started right after its last parameter reported (0-based report index + 1).
  const int want_before[] = {0, 2, 4, 5};
  for (size_t i = 0; i < comm.calls.size(); ++i) {
    EXPECT_EQ(comm.calls[i].op, "all_reduce");
    EXPECT_EQ(comm.calls[i].reports_before, want_before[i]) << "bucket " << i;
  }
  // Sum over 2 ranks holding the same values.
  EXPECT_FLOAT_EQ(ps.ptrs[3]->grad().f32()[7], 2.0f * 4.0f);
}

TEST(GradBuckets, IssuesInBucketOrderWhenGradientsArriveOutOfOrder) {
  OneParamABucket t(3);  // buckets {p2} {p1} {p0}
  auto& [ctx, ps, comm, o] = t;
  GradBuckets gb(ctx, ps.ptrs, comm, o);
  MicroBatch mb(ctx);
  gb.begin_step(1);
  gb.attach(mb);
  mb.grad_ready(*ps.ptrs[0]);  // bucket 2 complete first: must wait for 0 and 1
  EXPECT_TRUE(comm.calls.empty());
  mb.grad_ready(*ps.ptrs[2]);
  EXPECT_EQ(comm.calls.size(), 1u);
  mb.grad_ready(*ps.ptrs[1]);
  EXPECT_EQ(comm.calls.size(), 3u);
  gb.finish();
}

// Pipeline schedules interleave micro-batches (F0 F1 B0 F2 B1 ...) and GPT-2's tied embedding
// hears a last contribution after the step (the sum over its two stages): a gradient is final
// when all of its contributions are in, whatever order they come in.
TEST(GradBuckets, CountsContributionsIncludingLateOnes) {
  OneParamABucket t(2);  // {p1} {p0}
  auto& [ctx, ps, comm, o] = t;
  GradBuckets gb(ctx, ps.ptrs, comm, o);
  gb.add_late_contribution(*ps.ptrs[0]);
  gb.begin_step(2);
  MicroBatch m0(ctx), m1(ctx);
  gb.attach(m0);
  gb.attach(m1);
  m1.grad_ready(*ps.ptrs[1]);
  m0.grad_ready(*ps.ptrs[0]);
  EXPECT_TRUE(comm.calls.empty()) << "started after one of two micro-batches";
  m0.grad_ready(*ps.ptrs[1]);
  EXPECT_EQ(comm.calls.size(), 1u);
  m1.grad_ready(*ps.ptrs[0]);
  EXPECT_EQ(comm.calls.size(), 1u) << "p0 still waits for its late contribution";
  gb.grad_ready(*ps.ptrs[0]);
  EXPECT_EQ(comm.calls.size(), 2u);
  EXPECT_THROW(gb.grad_ready(*ps.ptrs[0]), Error) << "a fourth contribution to p0";
  gb.finish();
  // The counts start again with the next step.
  gb.begin_step(1);
  gb.grad_ready(*ps.ptrs[1]);
  EXPECT_EQ(comm.calls.size(), 3u);
  gb.finish();
}

// A late parameter (GPT-2's tied table on the last pipeline stage, a norm under sequence
// parallelism) is used last, so by reverse order of use it would be in the first bucket, and
// buckets start in order: no bucket could start before the step's late contributions. Late
// parameters go to buckets after all the others instead.
TEST(GradBuckets, LateParametersGoLastAndHoldNoOtherBucketBack) {
  OneParamABucket t(3);
  auto& [ctx, ps, comm, o] = t;
  GradBuckets gb(ctx, ps.ptrs, comm, o, {ps.ptrs[2]});
  ASSERT_EQ(gb.buckets().size(), 3u);
  EXPECT_EQ(gb.buckets()[0].slots[0].param, ps.ptrs[1]);
  EXPECT_EQ(gb.buckets()[1].slots[0].param, ps.ptrs[0]);
  EXPECT_EQ(gb.buckets()[2].slots[0].param, ps.ptrs[2]) << "the late parameter is not last";
  gb.begin_step(1);
  MicroBatch mb(ctx);
  gb.attach(mb);
  mb.grad_ready(*ps.ptrs[2]);  // its micro-batch contribution: one more to come
  mb.grad_ready(*ps.ptrs[1]);
  EXPECT_EQ(comm.calls.size(), 1u) << "the first bucket waited for the late parameter";
  mb.grad_ready(*ps.ptrs[0]);
  EXPECT_EQ(comm.calls.size(), 2u);
  gb.grad_ready(*ps.ptrs[2]);  // the late contribution (after the tied-embedding sum)
  EXPECT_EQ(comm.calls.size(), 3u);
  gb.finish();
}

TEST(GradBuckets, OverlapsTheBackwardOfARealModel) {
  ExecContext ctx;
  for (const char* family : {"gpt2", "llama"}) {
    Transformer m(ctx, model_test::tiny(family, 3));
    m.init_weights();
    FakeComm comm(0, 2);
    GradBucketOptions o;
    o.first_bucket_bytes = 1024;
    o.bucket_bytes = 4096;
    GradBuckets gb(ctx, m.parameters(), comm, o);
    ASSERT_GE(gb.buckets().size(), 3u) << family;
    m.zero_grad(ctx);
    MicroBatch mb(ctx);
    gb.begin_step(1);
    gb.attach(mb);
    m.forward_backward(mb, model_test::tokens_of(2, 6, 11, 1), model_test::tokens_of(2, 6, 11, 2),
                       0.1f);
    // Every bucket started during the backward, none left for finish().
    EXPECT_EQ(comm.calls.size(), gb.buckets().size()) << family;
    gb.finish();
    // The first bucket holds the last-used parameters (final norm / head), the last one the
    // token embedding.
    EXPECT_EQ(gb.buckets().back().slots.back().param, m.parameters().front()) << family;
  }
}

TEST(GradBuckets, Bf16AllReduceAndReduceScatterConvertBack) {
  ExecContext ctx;
  Params ps;
  ps.add(ctx, "a", 5);
  ps.add(ctx, "b", 6);  // 11 elements: padded to 12 for 2 ranks
  FakeComm comm(1, 2);
  GradBucketOptions o;
  o.comm_dtype = DType::BF16;
  o.reduce_scatter = true;
  GradBuckets gb(ctx, ps.ptrs, comm, o);
  ASSERT_EQ(gb.buckets().size(), 1u);
  EXPECT_EQ(gb.buckets()[0].numel, 12);
  EXPECT_EQ(gb.shard_begin(0), 6);
  for (int i = 0; i < 5; ++i) ps.ptrs[0]->grad().f32()[i] = 0.1f * static_cast<float>(i);
  for (int i = 0; i < 6; ++i) ps.ptrs[1]->grad().f32()[i] = 1.0f + static_cast<float>(i);
  gb.finish();
  ASSERT_EQ(comm.calls.size(), 1u);
  EXPECT_EQ(comm.calls[0].dtype, DType::BF16);
  // Reverse order of use: flat = b[0..5], a[0..4], padding. Rank 1's shard is elements 6..11
  // = a then the padding, summed over 2 ranks in bf16.
  const float* s = gb.shard(0).f32();
  for (int i = 0; i < 5; ++i)
    EXPECT_FLOAT_EQ(s[i], 2.0f * bf16_to_float(float_to_bf16(0.1f * static_cast<float>(i))));
  EXPECT_EQ(s[5], 0.0f);

  GradBucketOptions ar;
  ar.comm_dtype = DType::BF16;
  Params qs;
  qs.add(ctx, "c", 3);
  GradBuckets gb2(ctx, qs.ptrs, comm, ar);
  qs.ptrs[0]->grad().f32()[0] = 1.0f / 3.0f;
  gb2.finish();
  // bf16 rounding of 1/3 (0.333984375) doubled, back in f32.
  EXPECT_FLOAT_EQ(qs.ptrs[0]->grad().f32()[0], 2.0f * bf16_to_float(float_to_bf16(1.0f / 3.0f)));
}

// A group of one (a one-process run, or dp = 1 under tp/pp) sends nothing, so a 16-bit wire
// type must not round its gradients: they stay exactly what the backward accumulated.
TEST(GradBuckets, GroupOfOneKeepsF32GradientsWhateverTheWireType) {
  ExecContext ctx;
  SelfCommunicator self("dp");
  for (bool rs : {false, true}) {
    Params ps;
    ps.add(ctx, "a", 5);
    ps.add(ctx, "b", 6);
    GradBucketOptions o;
    o.comm_dtype = DType::BF16;
    o.reduce_scatter = rs;
    GradBuckets gb(ctx, ps.ptrs, self, o);
    gb.begin_step(1);
    for (int i = 0; i < 5; ++i) ps.ptrs[0]->grad().f32()[i] = 1.0f / (3.0f + static_cast<float>(i));
    for (int i = 0; i < 6; ++i) ps.ptrs[1]->grad().f32()[i] = 0.1f * static_cast<float>(i + 1);
    for (Parameter* p : {ps.ptrs[1], ps.ptrs[0]}) gb.grad_ready(*p);
    gb.finish();
    ASSERT_EQ(gb.buckets().size(), 1u);
    EXPECT_EQ(gb.buckets()[0].numel, 11);  // no padding for one part
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(ps.ptrs[0]->grad().f32()[i], 1.0f / (3.0f + static_cast<float>(i))) << rs;
    if (rs) {
      // The whole bucket is the shard: b then a, f32.
      ASSERT_EQ(gb.shard(0).dtype(), DType::F32);
      EXPECT_EQ(gb.shard_numel(0), 11);
      for (int i = 0; i < 6; ++i) EXPECT_EQ(gb.shard(0).f32()[i], 0.1f * static_cast<float>(i + 1));
      for (int i = 0; i < 5; ++i)
        EXPECT_EQ(gb.shard(0).f32()[6 + i], 1.0f / (3.0f + static_cast<float>(i)));
    }
  }
}

}  // namespace
}  // namespace braid
