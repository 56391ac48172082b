// bench_allreduce: braid's all-reduce bandwidth against a bare MPI_Allreduce of the same bytes,
// and how much of an all-reduce stays exposed when the caller computes meanwhile.
// Usage: mpirun -np 2 bench_allreduce [--max-mb N] [--reps N] [--overlap-mb N] [--poll-us N]
//                                     [--profile device_profile.json]
//        mpirun -np G bench_allreduce --backend nccl [--max-mb N] [--reps N]
// --backend nccl: one GPU per rank (its local rank, as braid train places it), braid's NCCL
// communicator on device buffers; prints nccl-tests' columns (time, algbw = bytes / time,
// busbw = algbw x 2 (n-1)/n) for f32 and bf16 sums.
// --profile: fit t = latency + bus bytes / bandwidth to braid's times and store the fit in a
// profile from `braid plan --calibrate` (comm_latency_us, comm_bus_gbs: the planner's CPU
// communication model, docs/plan.md).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/kernels/cuda/runtime.h"
#include "launch/plan/gpu_table.h"
#include "launch/train/exec_setup.h"
#include "parallel/nccl_communicator.h"
#include "parallel/world.h"

namespace {

using clock_type = std::chrono::steady_clock;

double now_s() {
  return std::chrono::duration<double>(clock_type::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The slowest rank's time decides a collective's time.
double max_over_ranks(double t) {
  double out = 0;
  MPI_Allreduce(&t, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

double time_bare(float* buf, int n, int reps) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now_s();
  for (int i = 0; i < reps; ++i)
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return max_over_ranks((now_s() - t0) / reps);
}

double time_braid(braid::Communicator& c, const braid::Tensor& t, int reps) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now_s();
  for (int i = 0; i < reps; ++i) c.all_reduce(t, braid::ReduceOp::Sum).wait();
  return max_over_ranks((now_s() - t0) / reps);
}

// Compute-bound work on a cache-resident buffer: iters passes of a multiply-add.
float compute(std::vector<float>& x, long iters) {
  for (long k = 0; k < iters; ++k)
    for (float& v : x) v = v * 0.999f + 0.001f;
  return x[0];
}

double time_compute(std::vector<float>& x, long iters) {
  double t0 = now_s();
  volatile float sink = compute(x, iters);
  (void)sink;
  return now_s() - t0;
}

const char* str_arg(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return nullptr;
}

// The fit --profile stores: the latency is the time of the smallest all-reduce (4 KiB, where
// bytes cost well under a microsecond); the bandwidth is the median over the buffers of 64 KiB
// and more of bus bytes / (time - latency). A median, not a least-squares slope: on a shared
// machine one disturbed large size would otherwise set the whole line.
void store_fit(const char* path, const std::vector<double>& bus_bytes,
               const std::vector<double>& seconds, int ranks) {
  const double alpha = seconds.front();
  std::vector<double> rates;
  for (size_t i = 0; i < bus_bytes.size(); ++i)
    if (bus_bytes[i] >= 65536 && seconds[i] > alpha)
      rates.push_back(bus_bytes[i] / (seconds[i] - alpha));
  if (rates.empty()) {
    std::fprintf(stderr, "bench_allreduce: no size above the latency; --profile not written\n");
    return;
  }
  braid::plan::DeviceProfile p = braid::plan::load_device_profile(path);
  p.cpu.comm_bus_gbs = median(rates) / 1e9;
  // The planner charges 2 (n-1) ring hops per all-reduce; stored as the cost of 2 hops.
  p.cpu.comm_latency_us = alpha * 1e6 / (ranks - 1);
  braid::plan::save_device_profile(p, path);
  std::printf("\nprofile %s: comm_latency_us %.1f, comm_bus_gbs %.2f (fit on %d ranks)\n", path,
              p.cpu.comm_latency_us, p.cpu.comm_bus_gbs, ranks);
}

long arg(int argc, char** argv, const char* name, long def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atol(argv[i + 1]);
  return def;
}

// --backend nccl: the bus-bandwidth table of braid's NCCL communicator, nccl-tests' way.
int run_nccl(braid::World& world, long max_mb, int reps) {
  const bool root = world.rank() == 0;
  if (!braid::nccl_built()) {
    if (root) std::fprintf(stderr, "bench_allreduce: this binary was built without NCCL\n");
    return 1;
  }
  if (braid::cuda::device_count() == 0) {
    if (root)
      std::fprintf(stderr, "bench_allreduce: --backend nccl needs a GPU per rank, but %s\n",
                   braid::cuda::unavailable_reason().c_str());
    return 1;
  }
  const braid::DeviceDecision d = braid::place_rank_gpu(
      braid::choose_device(braid::DeviceChoice::Cuda, "--backend nccl"), world.world());
  std::printf("rank %d: %s\n", world.rank(), d.reason.c_str());
  std::unique_ptr<braid::ExecContext> ctx = braid::make_context(d.device);
  braid::NcclCommOptions o;
  o.name = "world";
  o.world_rank = world.rank();
  o.compute_stream = ctx->stream().handle;
  o.timeout_s = 120;
  o.fatal = [&world](const std::string& m) { world.abort_job(m); };
  std::unique_ptr<braid::Communicator> c = braid::make_nccl_communicator(world.world(), o);
  const int n_ranks = world.size();
  const double bus = 2.0 * (n_ranks - 1) / n_ranks;
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (root)
    std::printf(
        "\nNCCL all_reduce(sum), %d ranks, %d repetitions per size, median of 5 rounds\n"
        "%12s %6s %12s %12s %12s\n",
        n_ranks, reps, "bytes", "type", "time us", "algbw GB/s", "busbw GB/s");
  for (braid::DType dt : {braid::DType::F32, braid::DType::BF16}) {
    const long elem = dt == braid::DType::F32 ? 4 : 2;
    for (long bytes = 8192; bytes <= max_mb * (1L << 20); bytes *= 4) {
      braid::Tensor t = ctx->zeros({bytes / elem}, dt, braid::MemCategory::Communication);
      auto timed = [&](int n) {
        ctx->stream().synchronize();
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now_s();
        braid::Work w;
        for (int i = 0; i < n; ++i) w = c->all_reduce(t, braid::ReduceOp::Sum);
        w.wait();  // one communication stream: the last one done means all are
        return max_over_ranks((now_s() - t0) / n);
      };
      timed(1);  // warm-up: NCCL's channels and buffers
      std::vector<double> v;
      for (int round = 0; round < 5; ++round) v.push_back(timed(reps));
      const double s = median(v);
      if (root)
        std::printf("%12ld %6s %12.1f %12.2f %12.2f\n", bytes,
                    std::string(braid::dtype_name(dt)).c_str(), s * 1e6, bytes / s / 1e9,
                    bus * bytes / s / 1e9);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  braid::WorldOptions opts;
  opts.poll_sleep_us = static_cast<int>(arg(argc, argv, "--poll-us", opts.poll_sleep_us));
  braid::World world(&argc, &argv, opts);
  const long max_mb = arg(argc, argv, "--max-mb", 64);
  const int reps = static_cast<int>(arg(argc, argv, "--reps", 5));
  const char* backend = str_arg(argc, argv, "--backend");
  if (backend != nullptr && std::strcmp(backend, "mpi") != 0) {
    if (std::strcmp(backend, "nccl") != 0) {
      if (world.rank() == 0)
        std::fprintf(stderr, "bench_allreduce: --backend %s: expected mpi or nccl\n", backend);
      return 1;
    }
    try {
      return run_nccl(world, max_mb, reps);
    } catch (const std::exception& e) {
      world.abort_job(std::string("bench_allreduce: rank ") + std::to_string(world.rank()) + ": " +
                      e.what());
    }
  }
  const long overlap_mb = arg(argc, argv, "--overlap-mb", 16);
  const char* profile = str_arg(argc, argv, "--profile");
  std::vector<double> fit_bytes, fit_s;
  if (profile) {
    try {  // every rank reads it, so all of them stop alike on a bad file
      braid::plan::load_device_profile(profile);
    } catch (const std::exception& e) {
      if (world.rank() == 0) std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
      return 1;
    }
  }
  braid::Communicator& c = world.world();
  const bool root = world.rank() == 0;
  const int n_ranks = world.size();
  if (root)
    std::printf(
        "ranks %d, poll sleep %d us, %d repetitions per size, median of 5 rounds\n\n"
        "%10s %12s %12s %12s %12s %7s\n",
        n_ranks, opts.poll_sleep_us, reps, "bytes", "bare ms", "braid ms", "bare GB/s",
        "braid GB/s", "ratio");
  // Bus bandwidth (nccl-tests): an all-reduce moves 2 (n-1)/n of the buffer per rank.
  const double bus = 2.0 * (n_ranks - 1) / n_ranks;
  for (long bytes = 4096; bytes <= max_mb * (1L << 20); bytes *= 4) {
    int n = static_cast<int>(bytes / 4);
    braid::Tensor t = braid::Tensor::zeros({n});
    std::vector<float> bare(static_cast<size_t>(n), 0.0f);
    time_bare(bare.data(), n, 1);  // warm-up: connections, pages
    time_braid(c, t, 1);
    std::vector<double> tb, tr;
    for (int round = 0; round < 5; ++round) {  // alternate, so drift hits both alike
      tb.push_back(time_bare(bare.data(), n, reps));
      tr.push_back(time_braid(c, t, reps));
    }
    double b = median(tb), r = median(tr);
    fit_bytes.push_back(bus * static_cast<double>(bytes));
    fit_s.push_back(r);
    if (root)
      std::printf("%10ld %12.3f %12.3f %12.2f %12.2f %6.1f%%\n", bytes, b * 1e3, r * 1e3,
                  bus * bytes / b / 1e9, bus * bytes / r / 1e9, 100.0 * b / r);
  }

  if (root && profile) store_fit(profile, fit_bytes, fit_s, n_ranks);

  // Overlap: an all-reduce of overlap_mb started, then computation on the caller lasting
  // about as long as the all-reduce alone; exposed = total - computation alone.
  int n = static_cast<int>(overlap_mb * (1L << 20) / 4);
  braid::Tensor t = braid::Tensor::zeros({n});
  std::vector<float> work(4096, 1.0f);
  double comm = 0;
  {
    std::vector<double> v;
    for (int i = 0; i < 5; ++i) v.push_back(time_braid(c, t, 1));
    comm = median(v);
  }
  // Calibrate the computation to the communication time on this rank, then agree on it.
  long iters = 16;
  while (time_compute(work, iters) < comm) iters *= 2;
  iters = static_cast<long>(static_cast<double>(iters) * comm / time_compute(work, iters));
  long agreed = 0;
  MPI_Allreduce(&iters, &agreed, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
  std::vector<double> alone, braid_total, bare_total;
  for (int round = 0; round < 5; ++round) {
    MPI_Barrier(MPI_COMM_WORLD);
    alone.push_back(max_over_ranks(time_compute(work, agreed)));
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    braid::Work w = c.all_reduce(t, braid::ReduceOp::Sum);
    volatile float sink = compute(work, agreed);
    (void)sink;
    w.wait();
    braid_total.push_back(max_over_ranks(now_s() - t0));
    // The same with a plain non-blocking MPI call and no progress thread: MPI moves data only
    // inside MPI calls, so most of the transfer waits for MPI_Wait.
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, t.raw(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
    sink = compute(work, agreed);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    bare_total.push_back(max_over_ranks(now_s() - t0));
  }
  double a = median(alone), bt = median(braid_total), nt = median(bare_total);
  if (root) {
    std::printf("\noverlap: all-reduce of %ld MiB f32 alone %.1f ms; computation alone %.1f ms\n",
                overlap_mb, comm * 1e3, a * 1e3);
    std::printf("%-40s %10s %12s %18s\n", "", "total ms", "exposed ms", "exposed / comm");
    std::printf("%-40s %10.1f %12.1f %17.0f%%\n", "braid all_reduce (progress thread)", bt * 1e3,
                (bt - a) * 1e3, 100.0 * (bt - a) / comm);
    std::printf("%-40s %10.1f %12.1f %17.0f%%\n", "MPI_Iallreduce + MPI_Wait (no thread)", nt * 1e3,
                (nt - a) * 1e3, 100.0 * (nt - a) / comm);
  }
  return 0;
}
