// The NCCL communicator on one rank (a one-GPU machine): every collective in every element type
// against exactly known results (small integers, exact in bf16 and f16), Work handles that
// complete on CUDA events, and the refusal of host tensors. Builds without NCCL skip.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/kernels/elementwise.h"
#include "tests/gpu/gpu_test_util.h"

#ifdef BRAID_WITH_NCCL
#include "parallel/comm_streams.h"
#include "parallel/nccl_communicator.h"
#include "parallel/self_communicator.h"
#endif

namespace braid::gpu_test {
namespace {

#ifdef BRAID_WITH_NCCL
// 1, 2, ..., 7, 1, 2, ... in `dtype` on the host.
Tensor counting(int64_t n, DType dtype) {
  Tensor f = Tensor::empty({n}, DType::F32);
  for (int64_t i = 0; i < n; ++i) f.f32()[i] = static_cast<float>(1 + i % 7);
  if (dtype == DType::I32) {
    Tensor t = Tensor::empty({n}, DType::I32);
    for (int64_t i = 0; i < n; ++i) t.i32()[i] = static_cast<int32_t>(1 + i % 7);
    return t;
  }
  return dtype == DType::F32 ? f : f.to(dtype, MemCategory::Other);
}

float at(const Tensor& host, int64_t i) {
  if (host.dtype() == DType::I32) return static_cast<float>(host.i32()[i]);
  const Tensor f = host.dtype() == DType::F32 ? host : host.to(DType::F32, MemCategory::Other);
  return f.f32()[i];
}

class GpuNccl : public GpuTest, public ::testing::WithParamInterface<DType> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    NcclCommOptions o;
    o.name = "dp";
    o.compute_stream = gpu().stream().handle;
    o.timeout_s = 60;
    comm_ = make_nccl_communicator(boot_, o);
  }
  Communicator& comm() { return *comm_; }

 private:
  SelfCommunicator boot_{"dp", 0, 60.0};
  std::unique_ptr<Communicator> comm_;
};

TEST_P(GpuNccl, OneRankCollectivesGiveExactlyKnownResults) {
  const DType dt = GetParam();
  const int64_t n = 1001;
  ASSERT_EQ(comm().size(), 1);
  const Tensor src = counting(n, dt);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}) {
    if (op == ReduceOp::Avg && dt == DType::I32) continue;
    Tensor t = up(src);
    Work w = comm().all_reduce(t, op);
    EXPECT_NE(w.device_event(), nullptr) << "not event-backed";
    w.wait();
    EXPECT_TRUE(w.done());
    const Tensor h = t.to_host();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(at(h, i), static_cast<float>(1 + i % 7)) << reduce_op_name(op) << " at " << i;
  }
  Tensor rs_out = up(Tensor::zeros({n}, dt));
  comm().reduce_scatter(up(src), rs_out, ReduceOp::Sum).wait();
  Tensor ag_out = up(Tensor::zeros({n}, dt));
  comm().all_gather(up(src), ag_out).wait();
  Tensor b = up(src);
  comm().broadcast(b, 0).wait();
  comm().barrier().wait();
  const Tensor rs = rs_out.to_host(), ag = ag_out.to_host(), bh = b.to_host();
  for (int64_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(1 + i % 7);
    ASSERT_EQ(at(rs, i), want) << "reduce_scatter at " << i;
    ASSERT_EQ(at(ag, i), want) << "all_gather at " << i;
    ASSERT_EQ(at(bh, i), want) << "broadcast at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuNccl,
                         ::testing::Values(DType::F32, DType::BF16, DType::F16, DType::I32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The tensor-parallel regions' pattern: the compute stream waits for the collective's event (no
// host wait), the next kernel reads the result, and the watchdog lets go of the operation once
// its event has fired.
TEST_F(GpuTest, NcclStreamWaitOrdersTheNextKernelAndTheWatchdogLetsGo) {
  SelfCommunicator boot("tp", 0, 60.0);
  NcclCommOptions o;
  o.name = "tp";
  o.compute_stream = gpu().stream().handle;
  o.timeout_s = 60;
  auto comm = make_nccl_communicator(boot, o);
  const int64_t n = 1 << 20;
  const Tensor src = counting(n, DType::F32);
  Tensor t = up(src);
  for (int round = 0; round < 4; ++round) {
    Work w = comm->all_reduce(t, ReduceOp::Sum);
    ASSERT_NE(w.device_event(), nullptr);
    wait_in_stream(gpu(), w);
    scale_inplace(gpu(), t, 2.0f);
  }
  const Tensor h = t.to_host();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(h.f32()[i], 16.0f * static_cast<float>(1 + i % 7)) << "at " << i;
  const auto start = std::chrono::steady_clock::now();
  while (CommStreams::watched_in_flight() > 0 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(CommStreams::watched_in_flight(), 0) << "the watchdog kept completed operations";
}

TEST_F(GpuTest, NcclRefusesHostTensors) {
  SelfCommunicator boot("tp", 0, 60.0);
  NcclCommOptions o;
  o.name = "tp";
  o.compute_stream = gpu().stream().handle;
  auto comm = make_nccl_communicator(boot, o);
  try {
    comm->all_reduce(Tensor::zeros({4}), ReduceOp::Sum);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device tensors"), std::string::npos) << e.what();
  }
}

#else
TEST(GpuNccl, Skipped) { GTEST_SKIP() << "this build has no NCCL (nccl.h/libnccl not found)"; }
#endif

}  // namespace
}  // namespace braid::gpu_test
