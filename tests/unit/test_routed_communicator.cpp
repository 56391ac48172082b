// RoutedCommunicator: every operation on host tensors reaches the host transport, nothing the
// device one; barrier reaches both, device first; groups with other members are refused. (Device
// tensors need a GPU: tests/gpu covers the NCCL side.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "parallel/routed_communicator.h"

namespace braid {
namespace {

class Recorder final : public Communicator {
 public:
  Recorder(std::string tag, std::vector<int> ranks, int rank, std::vector<std::string>* log)
      : Communicator("dp", std::move(ranks), rank, 30.0), tag_(std::move(tag)), log_(log) {}
  Work all_reduce(Tensor, ReduceOp) override { return note("all_reduce"); }
  Work reduce_scatter(Tensor, Tensor, ReduceOp) override { return note("reduce_scatter"); }
  Work all_gather(Tensor, Tensor) override { return note("all_gather"); }
  Work broadcast(Tensor, int) override { return note("broadcast"); }
  Work send(Tensor, int, int) override { return note("send"); }
  Work recv(Tensor, int, int) override { return note("recv"); }
  Work barrier() override { return note("barrier"); }

 private:
  Work note(const char* op) {
    log_->push_back(tag_ + " " + op);
    return Work::completed();
  }
  std::string tag_;
  std::vector<std::string>* log_;
};

TEST(RoutedCommunicator, HostTensorsTakeTheHostTransportAndBarrierBoth) {
  std::vector<std::string> log;
  Recorder host("host", {4, 7}, 1, &log);
  RoutedCommunicator c(std::make_unique<Recorder>("device", std::vector<int>{4, 7}, 1, &log), host);
  EXPECT_EQ(c.name(), "dp");
  EXPECT_EQ(c.rank(), 1);
  EXPECT_EQ(c.world_ranks(), (std::vector<int>{4, 7}));
  Tensor a = Tensor::zeros({4}, DType::F32);
  Tensor b = Tensor::zeros({8}, DType::F32);
  c.all_reduce(a, ReduceOp::Sum).wait();
  c.reduce_scatter(b, a, ReduceOp::Sum).wait();
  c.all_gather(a, b).wait();
  c.broadcast(a, 0).wait();
  c.send(a, 0).wait();
  c.recv(a, 0).wait();
  c.barrier().wait();
  EXPECT_EQ(log, (std::vector<std::string>{"host all_reduce", "host reduce_scatter",
                                           "host all_gather", "host broadcast", "host send",
                                           "host recv", "device barrier", "host barrier"}));
}

TEST(RoutedCommunicator, RefusesADeviceGroupWithOtherMembers) {
  std::vector<std::string> log;
  Recorder host("host", {0, 1}, 0, &log);
  EXPECT_THROW(RoutedCommunicator(
                   std::make_unique<Recorder>("device", std::vector<int>{0, 2}, 0, &log), host),
               Error);
  EXPECT_THROW(RoutedCommunicator(
                   std::make_unique<Recorder>("device", std::vector<int>{0, 1}, 1, &log), host),
               Error);
}

}  // namespace
}  // namespace braid
