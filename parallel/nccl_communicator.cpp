// NcclCommunicator: NCCL collectives on a communication stream, ordered by CommStreams.
#include "parallel/nccl_communicator.h"

#include <nccl.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/kernels/cuda/runtime.h"
#include "parallel/comm_streams.h"

namespace braid {

bool nccl_built() { return true; }

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
    case DType::I32:
      return ncclInt32;
    default:
      break;
  }
  throw Error(
      fmt::format("NCCL: element type {} is not supported (f32, bf16, f16, i32)", dtype_name(t)));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
  }
  return ncclSum;
}

// One direction of point-to-point traffic with one peer: a two-rank communicator (the sender is
// its rank 0) and its own stream.
struct P2pChannel {
  ncclComm_t comm = nullptr;
  void* stream = nullptr;
  std::unique_ptr<CommStreams> streams;
};

class NcclCommunicator final : public Communicator {
 public:
  // sends / recvs: the point-to-point channels' communicators by peer group rank.
  NcclCommunicator(ncclComm_t comm, std::vector<int> world_ranks, int rank,
                   const NcclCommOptions& o, const std::map<int, ncclComm_t>& sends,
                   const std::map<int, ncclComm_t>& recvs)
      : Communicator(o.name, std::move(world_ranks), rank, o.timeout_s),
        comm_(comm),
        world_rank_(o.world_rank),
        fatal_(o.fatal),
        comm_stream_(cuda::stream_create()),
        streams_(
            cuda_stream_ops(), o.compute_stream, comm_stream_,
            [this](const std::string& what, double waited_s) { check(comm_, what, waited_s); },
            /*watched=*/true),
        scratch_(cuda::malloc_device(sizeof(int32_t))) {
    BRAID_CHECK(scratch_ != nullptr, "NCCL group '{}': out of device memory", name());
    const std::string label = fmt::format("braid: rank {}: group '{}' (group rank {} of {}, NCCL)",
                                          world_rank_, name(), this->rank(), size());
    streams_.set_label(label);
    for (const bool send : {true, false})
      for (const auto& [peer, c] : send ? sends : recvs) {
        P2pChannel& ch = (send ? send_ch_ : recv_ch_)[peer];
        ch.comm = c;
        ch.stream = cuda::stream_create();
        const ncclComm_t cc = c;
        ch.streams = std::make_unique<CommStreams>(
            cuda_stream_ops(), o.compute_stream, ch.stream,
            [this, cc](const std::string& what, double waited_s) { check(cc, what, waited_s); },
            /*watched=*/true);
        ch.streams->set_label(label);
      }
  }

  ~NcclCommunicator() override {
    // No watchdog check may reach a communicator being destroyed.
    streams_.unwatch();
    for (auto* side : {&send_ch_, &recv_ch_})
      for (auto& [peer, ch] : *side) ch.streams->unwatch();
    // Destroyed while an error unwinds: an operation may be waiting for a peer that will never
    // come, so abort rather than wait for the streams (and never throw from here).
    if (std::uncaught_exceptions() > 0 && !aborted_.exchange(true)) abort_all();
    // Else the streams drain and the communicators are destroyed; a device fault there (the
    // synchronisation throws) aborts the rest instead.
    auto drain = [this](void* stream, ncclComm_t& comm) {
      if (aborted_.load()) return;
      try {
        cuda::stream_synchronize(stream);
        ncclCommDestroy(comm);
        comm = nullptr;  // abort_all skips it
      } catch (const std::exception&) {
        if (!aborted_.exchange(true)) abort_all();
      }
    };
    for (auto* side : {&send_ch_, &recv_ch_})
      for (auto& [peer, ch] : *side) drain(ch.stream, ch.comm);
    drain(comm_stream_, comm_);
    for (auto* side : {&send_ch_, &recv_ch_})
      for (auto& [peer, ch] : *side) {
        ch.streams.reset();
        cuda::stream_destroy(ch.stream);
      }
    cuda::free_device(scratch_);
    cuda::stream_destroy(comm_stream_);
  }

  Work all_reduce(Tensor t, ReduceOp op) override {
    check_tensor(t, "all_reduce", op);
    const std::string what = fmt::format("all_reduce({}, {})", reduce_op_name(op), tensor_desc(t));
    return run(what, {t}, [&](void* s) {
      return ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                           nccl_op(op), comm_, static_cast<cudaStream_t>(s));
    });
  }

  Work reduce_scatter(Tensor in, Tensor out, ReduceOp op) override {
    check_tensor(in, "reduce_scatter", op);
    check_tensor(out, "reduce_scatter", op);
    BRAID_CHECK(in.numel() == out.numel() * size() && in.dtype() == out.dtype(),
                "reduce_scatter on group '{}': in {} and out {} do not match {} ranks", name(),
                tensor_desc(in), tensor_desc(out), size());
    const std::string what =
        fmt::format("reduce_scatter({}, {})", reduce_op_name(op), tensor_desc(in));
    return run(what, {in, out}, [&](void* s) {
      return ncclReduceScatter(in.raw(), out.raw(), static_cast<size_t>(out.numel()),
                               nccl_type(in.dtype()), nccl_op(op), comm_,
                               static_cast<cudaStream_t>(s));
    });
  }

  Work all_gather(Tensor in, Tensor out) override {
    check_tensor(in, "all_gather", ReduceOp::Sum);
    check_tensor(out, "all_gather", ReduceOp::Sum);
    BRAID_CHECK(out.numel() == in.numel() * size() && in.dtype() == out.dtype(),
                "all_gather on group '{}': in {} and out {} do not match {} ranks", name(),
                tensor_desc(in), tensor_desc(out), size());
    const std::string what = fmt::format("all_gather({})", tensor_desc(in));
    return run(what, {in, out}, [&](void* s) {
      return ncclAllGather(in.raw(), out.raw(), static_cast<size_t>(in.numel()),
                           nccl_type(in.dtype()), comm_, static_cast<cudaStream_t>(s));
    });
  }

  Work broadcast(Tensor t, int root) override {
    check_tensor(t, "broadcast", ReduceOp::Sum);
    BRAID_CHECK(root >= 0 && root < size(), "broadcast on group '{}': root {} of {} ranks", name(),
                root, size());
    const std::string what = fmt::format("broadcast({}, root {})", tensor_desc(t), root);
    return run(what, {t}, [&](void* s) {
      return ncclBroadcast(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                           root, comm_, static_cast<cudaStream_t>(s));
    });
  }

  // Point-to-point inside a NCCL group, so a pair's send and recv progress together.
  Work send(Tensor t, int peer, int /*tag*/) override {
    check_tensor(t, "send", ReduceOp::Sum);
    check_peer(peer, "send");
    const std::string what = fmt::format("send({}) to group rank {}", tensor_desc(t), peer);
    if (auto it = send_ch_.find(peer); it != send_ch_.end()) {
      const ncclComm_t c = it->second.comm;  // the peer is rank 1 of the channel
      return run_on(*it->second.streams, what, {t}, [&](void* s) {
        return ncclSend(t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), 1, c,
                        static_cast<cudaStream_t>(s));
      });
    }
    return run(what, {t}, [&](void* s) {
      return ncclSend(t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), peer, comm_,
                      static_cast<cudaStream_t>(s));
    });
  }

  Work recv(Tensor t, int peer, int /*tag*/) override {
    check_tensor(t, "recv", ReduceOp::Sum);
    check_peer(peer, "recv");
    const std::string what = fmt::format("recv({}) from group rank {}", tensor_desc(t), peer);
    if (auto it = recv_ch_.find(peer); it != recv_ch_.end()) {
      const ncclComm_t c = it->second.comm;  // the peer is rank 0 of the channel
      return run_on(*it->second.streams, what, {t}, [&](void* s) {
        return ncclRecv(t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), 0, c,
                        static_cast<cudaStream_t>(s));
      });
    }
    return run(what, {t}, [&](void* s) {
      return ncclRecv(t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), peer, comm_,
                      static_cast<cudaStream_t>(s));
    });
  }

  Work barrier() override {
    return run("barrier", {}, [&](void* s) {
      return ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_,
                           static_cast<cudaStream_t>(s));
    });
  }

 private:
  template <class F>
  Work run(const std::string& what, std::vector<Tensor> keep, F&& call) {
    return run_on(streams_, what, std::move(keep), std::forward<F>(call));
  }

  template <class F>
  Work run_on(CommStreams& streams, const std::string& what, std::vector<Tensor> keep, F&& call) {
    std::lock_guard<std::mutex> lock(mu_);  // NCCL calls on one comm from one thread at a time
    auto held = std::make_shared<std::vector<Tensor>>(std::move(keep));
    return streams.launch(
        what,
        [&](void* s) {
          ncclGroupStart();
          const ncclResult_t rc = call(s);
          const ncclResult_t end = ncclGroupEnd();
          const ncclResult_t bad = rc != ncclSuccess ? rc : end;
          if (bad != ncclSuccess && bad != ncclInProgress)
            throw Error(fmt::format("braid: rank {}: {} on group '{}' failed: {}", world_rank_,
                                    what, name(), ncclGetErrorString(bad)));
        },
        std::move(held));
  }

  // Called while a caller waits and by the watchdog thread (comm_streams.h): NCCL's
  // asynchronous errors and the timeout end the job.
  void check(ncclComm_t comm, const std::string& what, double waited_s) {
    if (aborted_.load())  // the communicators are gone; the first failure has been reported
      throw Error(fmt::format("braid: rank {}: {} on group '{}': the group was aborted",
                              world_rank_, what, name()));
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess && async != ncclInProgress)
      fail(
          fmt::format("braid: rank {}: {} on group '{}' (group rank {} of {}): NCCL reported "
                      "an asynchronous error: {}; ending the job",
                      world_rank_, what, name(), rank(), size(), ncclGetErrorString(async)));
    if (waited_s > timeout_s())
      fail(
          fmt::format("braid: rank {}: {} on group '{}' (group rank {} of {}) did not finish "
                      "within timeout_s = {} s; waiting on {}; ending the job",
                      world_rank_, what, name(), rank(), size(), timeout_s(), peers()));
  }

  [[noreturn]] void fail(const std::string& message) {
    // The job's end first (it prints the message and ends every rank; an abort of the NCCL
    // communicators can take a while when kernels are stuck, and the process is going anyway);
    // without a fatal handler (tests) the communicators are aborted and the error thrown.
    if (fatal_) fatal_(message);
    if (!aborted_.exchange(true)) abort_all();
    throw Error(message);
  }

  // Every communicator not destroyed yet.
  void abort_all() {
    for (auto* side : {&send_ch_, &recv_ch_})
      for (auto& [peer, ch] : *side)
        if (ch.comm) ncclCommAbort(ch.comm);
    if (comm_) ncclCommAbort(comm_);
  }

  std::string peers() const {
    std::string s = "world ranks ";
    for (size_t i = 0; i < world_ranks().size(); ++i)
      if (static_cast<int>(i) != rank())
        s += (s.back() == ' ' ? "" : ", ") + std::to_string(world_ranks()[i]);
    return s;
  }

  void check_tensor(const Tensor& t, const char* op, ReduceOp rop) const {
    BRAID_CHECK(t.defined(), "{} on group '{}': an undefined tensor", op, name());
    BRAID_CHECK(!t.device().is_cpu(),
                "{} on group '{}': {} is on the CPU; the NCCL backend takes device tensors", op,
                name(), tensor_desc(t));
    BRAID_CHECK(!(rop == ReduceOp::Avg && t.dtype() == DType::I32),
                "{} on group '{}': avg is not defined for i32", op, name());
  }
  void check_peer(int peer, const char* op) const {
    BRAID_CHECK(peer >= 0 && peer < size() && peer != rank(),
                "{} on group '{}': peer {} is not another rank of {}", op, name(), peer, size());
  }

  ncclComm_t comm_;
  int world_rank_;
  std::function<void(const std::string&)> fatal_;
  void* comm_stream_;
  CommStreams streams_;
  void* scratch_;
  std::map<int, P2pChannel> send_ch_, recv_ch_;  // by peer group rank
  std::mutex mu_;
  std::atomic<bool> aborted_{false};
};

// NCCL connects a point-to-point channel on its first send or receive, inside that call, which
// waits there for the peer's first call on the same channel. The pipeline posts a receive one
// compute action ahead, so two stages could each wait in such a first call for the other (with
// 1f1b on two stages and one micro-batch: stage 0 in its first receive of a gradient, stage 1 in
// its first receive of an activation, which stage 0 sends only after its forward). One message
// each way on every channel, all in one NCCL group, connects them all at creation instead,
// where every stage takes part.
void connect_channels(const NcclCommOptions& o, const std::set<int>& peers,
                      std::map<int, ncclComm_t>& sends, std::map<int, ncclComm_t>& recvs) {
  const size_t bytes = 2 * sizeof(int32_t) * peers.size();
  void* buf = cuda::malloc_device(bytes);
  BRAID_CHECK(buf != nullptr, "NCCL group '{}': out of device memory", o.name);
  void* stream = cuda::stream_create();
  cuda::memset_sync(buf, 0, bytes);
  ncclGroupStart();
  ncclResult_t first = ncclSuccess;
  int32_t* slot = static_cast<int32_t*>(buf);
  for (int q : peers) {
    const ncclResult_t a =
        ncclSend(slot, 1, ncclInt32, 1, sends[q], static_cast<cudaStream_t>(stream));
    const ncclResult_t b =
        ncclRecv(slot + 1, 1, ncclInt32, 0, recvs[q], static_cast<cudaStream_t>(stream));
    if (first == ncclSuccess) first = a != ncclSuccess ? a : b;
    slot += 2;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (first == ncclSuccess) first = end;
  if (first == ncclSuccess) cuda::stream_synchronize(stream);
  cuda::stream_destroy(stream);
  cuda::free_device(buf);
  if (first != ncclSuccess)
    throw Error(
        fmt::format("braid: rank {}: connecting the NCCL point-to-point channels of "
                    "group '{}' failed: {}",
                    o.world_rank, o.name, ncclGetErrorString(first)));
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap,
                                                     const NcclCommOptions& o) {
  static_assert(sizeof(ncclUniqueId) % sizeof(int32_t) == 0);
  constexpr int64_t kWords = sizeof(ncclUniqueId) / sizeof(int32_t);
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess)
      throw Error(fmt::format("NCCL group '{}': ncclGetUniqueId failed: {}", o.name,
                              ncclGetErrorString(rc)));
  }
  Tensor buf = Tensor::empty({kWords}, DType::I32);
  std::memcpy(buf.raw(), &id, sizeof(id));
  bootstrap.broadcast(buf, 0).wait();
  std::memcpy(&id, buf.raw(), sizeof(id));
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank());
  if (rc != ncclSuccess)
    throw Error(
        fmt::format("braid: rank {}: creating the NCCL communicator of group '{}' ({} "
                    "ranks) failed: {}",
                    o.world_rank, o.name, bootstrap.size(), ncclGetErrorString(rc)));
  std::map<int, ncclComm_t> sends, recvs;
  const int n = bootstrap.size(), r = bootstrap.rank();
  if (o.p2p_channels && n > 1) {
    // Each rank makes the ids of the channels it sends on and hands each to its receiver over
    // the bootstrap group; then every channel is initialised in one NCCL group, so no order of
    // the pairs' initialisations can wait in a cycle.
    const std::set<int> peers{(r + 1) % n, (r + n - 1) % n};
    std::map<int, ncclUniqueId> send_ids;
    std::map<int, Tensor> inbox;
    std::vector<Tensor> outbox;
    std::vector<Work> works;
    constexpr int kTag = 0x6e63;  // bootstrap tag of the channel ids (nothing else in flight)
    for (int q : peers) {
      ncclUniqueId& sid = send_ids[q];
      const ncclResult_t g = ncclGetUniqueId(&sid);
      if (g != ncclSuccess)
        throw Error(fmt::format("NCCL group '{}': ncclGetUniqueId failed: {}", o.name,
                                ncclGetErrorString(g)));
      outbox.push_back(Tensor::empty({kWords}, DType::I32));
      std::memcpy(outbox.back().raw(), &sid, sizeof(sid));
      inbox[q] = Tensor::empty({kWords}, DType::I32);
      works.push_back(bootstrap.send(outbox.back(), q, kTag));
      works.push_back(bootstrap.recv(inbox[q], q, kTag));
    }
    for (Work& w : works) w.wait();
    ncclGroupStart();
    ncclResult_t first = ncclSuccess;
    for (int q : peers) {
      ncclUniqueId rid{};
      std::memcpy(&rid, inbox[q].raw(), sizeof(rid));
      const ncclResult_t a = ncclCommInitRank(&sends[q], 2, send_ids[q], 0);
      const ncclResult_t b = ncclCommInitRank(&recvs[q], 2, rid, 1);
      if (first == ncclSuccess) first = a != ncclSuccess ? a : b;
    }
    const ncclResult_t end = ncclGroupEnd();
    if (first == ncclSuccess) first = end;
    if (first != ncclSuccess)
      throw Error(
          fmt::format("braid: rank {}: creating the NCCL point-to-point channels of group "
                      "'{}' failed: {}",
                      o.world_rank, o.name, ncclGetErrorString(first)));
    connect_channels(o, peers, sends, recvs);
  }
  return std::make_unique<NcclCommunicator>(comm, bootstrap.world_ranks(), bootstrap.rank(), o,
                                            sends, recvs);
}

}  // namespace braid
