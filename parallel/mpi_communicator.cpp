// MpiCommunicator: non-blocking MPI calls started and tested by one progress thread per group.
#include "parallel/mpi_communicator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <climits>

#include "core/error.h"
#include "parallel/inflight_report.h"

namespace braid {

namespace {

int count_of(const Tensor& t, const char* op) {
  BRAID_CHECK(t.numel() <= INT_MAX, "{}: {} elements exceed the MPI count limit {}", op, t.numel(),
              INT_MAX);
  return static_cast<int>(t.numel());
}

// Divides every element by n in f32 arithmetic (one rounding for 16-bit types).
template <class T, float (*ToF)(T), T (*FromF)(float)>
void divide16(void* p, int64_t n, float d) {
  T* x = static_cast<T*>(p);
  for (int64_t i = 0; i < n; ++i) x[i] = FromF(ToF(x[i]) / d);
}

int index_of(const std::vector<int>& v, int x) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == x) return static_cast<int>(i);
  BRAID_CHECK(false, "world rank {} is not a member of [{}]", x, fmt::join(v, ", "));
  return -1;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, std::vector<int> world_ranks,
                                 int world_rank, double timeout_s, const MpiReduceOps* ops,
                                 FatalHandler fatal, const MpiProgress& progress)
    : Communicator(std::move(name), world_ranks, index_of(world_ranks, world_rank), timeout_s),
      comm_(comm),
      world_rank_(world_rank),
      ops_(ops),
      fatal_(std::move(fatal)),
      progress_(progress) {
  int r = 0, n = 0;
  MPI_Comm_rank(comm_, &r);
  MPI_Comm_size(comm_, &n);
  BRAID_CHECK(n == size() && r == rank(),
              "communicator '{}' has {} members with this process at rank {}, but the mesh "
              "expected world ranks [{}] with world rank {} at {}",
              this->name(), n, r, fmt::join(this->world_ranks(), ", "), world_rank_, rank());
  // Errors come back as return codes and fail the Work instead of killing the process mutely.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  thread_ = std::thread([this] { progress_loop(); });
  if (progress_.blocking_collectives) monitor_ = std::thread([this] { monitor_loop(); });
}

MpiCommunicator::~MpiCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (monitor_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(monitor_mu_);
      monitor_stop_ = true;
    }
    monitor_cv_.notify_all();
    monitor_.join();
  }
  MPI_Comm_free(&comm_);
}

void MpiCommunicator::check_tensor(const Tensor& t, const char* op, const char* arg) const {
  BRAID_CHECK(t.defined(), "{} on group '{}': {} is an undefined tensor", op, name(), arg);
  BRAID_CHECK(t.device().is_cpu(),
              "{} on group '{}': {} is on {}; the MPI backend takes host tensors", op, name(), arg,
              t.device().str());
}

MPI_Datatype MpiCommunicator::mpi_type(DType t) const {
  switch (t) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::I32:
      return MPI_INT32_T;
    case DType::U8:
      return MPI_UINT8_T;
    case DType::BF16:
    case DType::F16:
      return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op MpiCommunicator::mpi_op(ReduceOp op, DType t) const {
  bool max = op == ReduceOp::Max;
  switch (t) {
    case DType::F32:
    case DType::I32:
    case DType::U8:
      return max ? MPI_MAX : MPI_SUM;
    case DType::BF16:
      return max ? ops_->bf16_max : ops_->bf16_sum;
    case DType::F16:
      return max ? ops_->f16_max : ops_->f16_sum;
  }
  return MPI_OP_NULL;
}

std::function<void()> MpiCommunicator::avg_finisher(ReduceOp op, Tensor t) const {
  if (op != ReduceOp::Avg || size() == 1) return {};
  BRAID_CHECK(t.dtype() != DType::I32 && t.dtype() != DType::U8,
              "avg on group '{}' is not defined for integer tensors", name());
  float d = static_cast<float>(size());
  return [t, d] {
    switch (t.dtype()) {
      case DType::F32: {
        float* x = t.data<float>();
        for (int64_t i = 0; i < t.numel(); ++i) x[i] /= d;
        break;
      }
      case DType::BF16:
        divide16<bf16, bf16_to_float, float_to_bf16>(t.raw(), t.numel(), d);
        break;
      case DType::F16:
        divide16<f16, f16_to_float, float_to_f16>(t.raw(), t.numel(), d);
        break;
      case DType::I32:
      case DType::U8:
        break;
    }
  };
}

std::string MpiCommunicator::timeout_message(const Op& op) const {
  return fmt::format(
      "braid: rank {}: {} on group '{}' (group rank {} of {}) did not finish within "
      "timeout_s = {} s; waiting on {}; ending the job",
      world_rank_, op.what, name(), rank(), size(), timeout_s(), op.peers);
}

// A blocking collective progresses inside MPI for as long as it runs, the best overlap a
// spare core can give, and uses the library's tuned algorithms. The monitor thread enforces
// the timeout meanwhile.
void MpiCommunicator::run_blocking(Op& op) {
  {
    std::lock_guard<std::mutex> lock(monitor_mu_);
    blocking_message_ = timeout_message(op);
    blocking_since_ = op.started;
    blocking_ = true;
  }
  int rc = op.start(nullptr);
  {
    std::lock_guard<std::mutex> lock(monitor_mu_);
    blocking_ = false;
  }
  complete(op, rc == MPI_SUCCESS ? std::string() : mpi_error_string(rc));
}

void MpiCommunicator::monitor_loop() {
  std::unique_lock<std::mutex> lock(monitor_mu_);
  while (!monitor_stop_) {
    monitor_cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (blocking_ &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - blocking_since_).count() >
            timeout_s())
      fatal_(blocking_message_);
  }
}

std::string MpiCommunicator::collective_peers() const {
  std::vector<int> others;
  for (int r : world_ranks())
    if (r != world_rank_) others.push_back(r);
  return others.empty() ? "no peers" : fmt::format("world ranks {}", fmt::join(others, ", "));
}

Work MpiCommunicator::all_reduce(Tensor t, ReduceOp op) {
  check_tensor(t, "all_reduce", "t");
  int n = count_of(t, "all_reduce");
  Op o;
  o.what = fmt::format("all_reduce({}, {})", reduce_op_name(op), tensor_desc(t));
  o.peers = collective_peers();
  o.collective = true;
  o.finish = avg_finisher(op, t);
  MPI_Datatype type = mpi_type(t.dtype());
  MPI_Op mop = mpi_op(op, t.dtype());
  o.start = [this, t, n, type, mop](MPI_Request* req) {
    return req ? MPI_Iallreduce(MPI_IN_PLACE, t.raw(), n, type, mop, comm_, req)
               : MPI_Allreduce(MPI_IN_PLACE, t.raw(), n, type, mop, comm_);
  };
  o.keep = {t};
  return enqueue(std::move(o));
}

Work MpiCommunicator::reduce_scatter(Tensor in, Tensor out, ReduceOp op) {
  check_tensor(in, "reduce_scatter", "in");
  check_tensor(out, "reduce_scatter", "out");
  BRAID_CHECK(in.dtype() == out.dtype(), "reduce_scatter on group '{}': in is {} but out is {}",
              name(), tensor_desc(in), tensor_desc(out));
  BRAID_CHECK(in.numel() == out.numel() * size(),
              "reduce_scatter on group '{}': in has {} elements, expected size {} x out's {}",
              name(), in.numel(), size(), out.numel());
  BRAID_CHECK(!in.same_storage(out) || in.numel() == 0,
              "reduce_scatter on group '{}': in and out share storage", name());
  count_of(in, "reduce_scatter");
  int n = count_of(out, "reduce_scatter");
  Op o;
  o.what = fmt::format("reduce_scatter({}, {} -> {})", reduce_op_name(op), tensor_desc(in),
                       tensor_desc(out));
  o.peers = collective_peers();
  o.collective = true;
  o.finish = avg_finisher(op, out);
  MPI_Datatype type = mpi_type(in.dtype());
  MPI_Op mop = mpi_op(op, in.dtype());
  o.start = [this, in, out, n, type, mop](MPI_Request* req) {
    return req ? MPI_Ireduce_scatter_block(in.raw(), out.raw(), n, type, mop, comm_, req)
               : MPI_Reduce_scatter_block(in.raw(), out.raw(), n, type, mop, comm_);
  };
  o.keep = {in, out};
  return enqueue(std::move(o));
}

Work MpiCommunicator::all_gather(Tensor in, Tensor out) {
  check_tensor(in, "all_gather", "in");
  check_tensor(out, "all_gather", "out");
  BRAID_CHECK(in.dtype() == out.dtype(), "all_gather on group '{}': in is {} but out is {}", name(),
              tensor_desc(in), tensor_desc(out));
  BRAID_CHECK(out.numel() == in.numel() * size(),
              "all_gather on group '{}': out has {} elements, expected size {} x in's {}", name(),
              out.numel(), size(), in.numel());
  count_of(out, "all_gather");
  int n = count_of(in, "all_gather");
  Op o;
  o.what = fmt::format("all_gather({} -> {})", tensor_desc(in), tensor_desc(out));
  o.peers = collective_peers();
  o.collective = true;
  MPI_Datatype type = mpi_type(in.dtype());
  o.start = [this, in, out, n, type](MPI_Request* req) {
    return req ? MPI_Iallgather(in.raw(), n, type, out.raw(), n, type, comm_, req)
               : MPI_Allgather(in.raw(), n, type, out.raw(), n, type, comm_);
  };
  o.keep = {in, out};
  return enqueue(std::move(o));
}

Work MpiCommunicator::broadcast(Tensor t, int root) {
  check_tensor(t, "broadcast", "t");
  BRAID_CHECK(root >= 0 && root < size(), "broadcast on group '{}': root {} outside 0..{}", name(),
              root, size() - 1);
  int n = count_of(t, "broadcast");
  Op o;
  o.what = fmt::format("broadcast({}, root {})", tensor_desc(t), root);
  o.peers = collective_peers();
  o.collective = true;
  MPI_Datatype type = mpi_type(t.dtype());
  o.start = [this, t, n, type, root](MPI_Request* req) {
    return req ? MPI_Ibcast(t.raw(), n, type, root, comm_, req)
               : MPI_Bcast(t.raw(), n, type, root, comm_);
  };
  o.keep = {t};
  return enqueue(std::move(o));
}

Work MpiCommunicator::send(Tensor t, int peer, int tag) {
  check_tensor(t, "send", "t");
  BRAID_CHECK(peer >= 0 && peer < size() && peer != rank(),
              "send on group '{}': peer {} is not another member of 0..{}", name(), peer,
              size() - 1);
  int n = count_of(t, "send");
  Op o;
  o.what = fmt::format("send({} to group rank {}, tag {})", tensor_desc(t), peer, tag);
  o.peers = fmt::format("world rank {}", world_ranks()[peer]);
  MPI_Datatype type = mpi_type(t.dtype());
  o.start = [this, t, n, type, peer, tag](MPI_Request* req) {
    return MPI_Isend(t.raw(), n, type, peer, tag, comm_, req);
  };
  o.keep = {t};
  return enqueue(std::move(o));
}

Work MpiCommunicator::recv(Tensor t, int peer, int tag) {
  check_tensor(t, "recv", "t");
  BRAID_CHECK(peer >= 0 && peer < size() && peer != rank(),
              "recv on group '{}': peer {} is not another member of 0..{}", name(), peer,
              size() - 1);
  int n = count_of(t, "recv");
  Op o;
  o.what = fmt::format("recv({} from group rank {}, tag {})", tensor_desc(t), peer, tag);
  o.peers = fmt::format("world rank {}", world_ranks()[peer]);
  MPI_Datatype type = mpi_type(t.dtype());
  o.start = [this, t, n, type, peer, tag](MPI_Request* req) {
    return MPI_Irecv(t.raw(), n, type, peer, tag, comm_, req);
  };
  o.keep = {t};
  return enqueue(std::move(o));
}

Work MpiCommunicator::barrier() {
  Op o;
  o.what = "barrier()";
  o.peers = collective_peers();
  o.collective = true;
  o.start = [this](MPI_Request* req) {
    return req ? MPI_Ibarrier(comm_, req) : MPI_Barrier(comm_);
  };
  return enqueue(std::move(o));
}

Work MpiCommunicator::enqueue(Op op) {
  op.state = std::make_shared<detail::WorkState>();
  op.state->waiters = &waiters_;
  Work w(op.state);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(op));
  }
  cv_.notify_one();
  return w;
}

void MpiCommunicator::complete(Op& op, std::string error) {
  if (error.empty() && op.finish) {
    try {
      op.finish();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!error.empty())
    error = fmt::format("braid: rank {}: {} on group '{}' ({}) failed: {}", world_rank_, op.what,
                        name(), op.peers, error);
  inflight::end(op.report_slot);
  op.report_slot = -1;
  op.keep.clear();
  op.state->finish(std::move(error));
}

// Starts queued operations in issue order (so every member starts collectives in the same
// order) and tests all in-flight ones. MPI progresses non-blocking collectives only inside MPI
// calls, so this thread keeps testing: tightly while a caller waits, with short sleeps while
// the caller computes (leaving it the core).
void MpiCommunicator::progress_loop() {
  std::vector<Op> inflight;
  for (;;) {
    std::deque<Op> fresh;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (inflight.empty()) cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_ && queue_.empty() && inflight.empty()) return;
      fresh.swap(queue_);
    }
    for (Op& op : fresh) {
      op.started = std::chrono::steady_clock::now();
      op.report_slot = inflight::begin(
          fmt::format("braid: rank {}: ended by a signal while waiting in {} on group '{}' ({})",
                      world_rank_, op.what, name(), op.peers));
      if (op.collective && progress_.blocking_collectives) {
        run_blocking(op);
        continue;
      }
      int rc = op.start(&op.req);
      if (rc != MPI_SUCCESS) {
        complete(op, mpi_error_string(rc));
        continue;
      }
      inflight.push_back(std::move(op));
    }
    bool progressed = false;
    auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < inflight.size();) {
      Op& op = inflight[i];
      int flag = 0;
      int rc = MPI_Test(&op.req, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS || flag) {
        complete(op, rc == MPI_SUCCESS ? std::string() : mpi_error_string(rc));
        inflight.erase(inflight.begin() + static_cast<std::ptrdiff_t>(i));
        progressed = true;
        continue;
      }
      double waited = std::chrono::duration<double>(now - op.started).count();
      if (waited > timeout_s()) {
        fatal_(
            fmt::format("braid: rank {}: {} on group '{}' (group rank {} of {}) did not "
                        "finish within timeout_s = {} s; waiting on {}; ending the job",
                        world_rank_, op.what, name(), rank(), size(), timeout_s(), op.peers));
      }
      ++i;
    }
    if (!inflight.empty() && !progressed && waiters_.load() == 0 && progress_.poll_sleep_us > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(progress_.poll_sleep_us));
  }
}

}  // namespace braid
