// bench_dp: data-parallel gradient sync on the benchmark model (configs/bench_gpt2.yaml shapes).
//
//   mpirun -np 2 -x OMP_NUM_THREADS=1 bench_dp sync  [--config F] [--rounds N]
//     backward + sync time per micro-batch with overlapped buckets (25 MiB, first 1 MiB), with
//     one all-reduce of all gradients after the backward, and with no communication; the
//     communication time alone; exposed communication = (overlapped - none) / communication;
//     and a bucket-size sweep. Variants run interleaved, round by round, and each figure is the
//     median over rounds (the machine is shared: ratios within a round are what to compare).
//   bench_dp train [--config F] [--steps N] [--accum A]
//     tokens/s of full training steps (forward, backward, bucket sync, clip, AdamW) for the
//     layout it is started in: `mpirun -np 2 -x OMP_NUM_THREADS=1 bench_dp train --accum 1` and
//     `OMP_NUM_THREADS=2 bench_dp train --accum 2` train the same global batch.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/models/transformer.h"
#include "core/random.h"
#include "launch/config/config.h"
#include "optim/adamw.h"
#include "parallel/grad_buckets.h"
#include "parallel/scalar_reduce.h"
#include "parallel/world.h"

namespace braid {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The slowest rank decides a data-parallel step.
double max_over(Communicator& c, double t) {
  Tensor x = Tensor::empty({1});
  x.f32()[0] = static_cast<float>(t);
  c.all_reduce(x, ReduceOp::Max).wait();
  return x.f32()[0];
}

Tensor random_tokens(int64_t B, int64_t T, int vocab, uint64_t seed) {
  Tensor t = Tensor::empty({B, T}, DType::I32);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.i32()[i] = static_cast<int32_t>(mix64(seed * 1000003 + i) % static_cast<uint64_t>(vocab));
  return t;
}

struct Args {
  std::string mode = "sync";
  std::string config = "configs/bench_gpt2.yaml";  // run from the repository root
  int rounds = 3;
  int steps = 6;
  int accum = 1;
};

struct Timing {
  double total;  // backward (with the loss head) + sync
  // In finish() on the rank that got there last: communication still running after the
  // backward (exposed). The other ranks also wait there for the last one's backward (skew).
  double finish;
};

// One micro-batch's backward + sync, in seconds on the slowest rank. buckets == nullptr: no
// communication. attach: overlapped; otherwise every bucket starts in finish().
Timing backward_sync(ExecContext& ctx, Transformer& m, GradBuckets* buckets, bool attach,
                     const Tensor& tok, const Tensor& tgt, Communicator& world) {
  m.zero_grad(ctx);
  MicroBatch mb(ctx);
  if (buckets && attach) {
    buckets->begin_step(1);
    buckets->attach(mb);
  }
  Tensor h = m.forward(tok, mb);
  world.barrier().wait();
  const double t0 = now_s();
  m.loss(h, tgt, 1.0f / static_cast<float>(tok.numel()), mb);
  m.backward(Tensor(), mb);
  const double t1 = now_s();
  if (buckets) buckets->finish();
  const double t2 = now_s();
  return {max_over(world, t2 - t0), -max_over(world, -(t2 - t1))};
}

int run_sync(World& w, const Args& a, const RunConfig& cfg) {
  ExecContext ctx;
  Transformer m(ctx, cfg.model);
  m.init_weights();
  Communicator& c = w.world();
  const int B = cfg.data.micro_batch, T = cfg.data.seq_len;
  const Tensor tok = random_tokens(B, T, cfg.model.vocab_size, 1 + c.rank());
  const Tensor tgt = random_tokens(B, T, cfg.model.vocab_size, 101 + c.rank());
  auto make = [&](double mb, double first_mb) {
    GradBucketOptions o;
    o.bucket_bytes = static_cast<int64_t>(mb * 1048576.0);
    o.first_bucket_bytes = static_cast<int64_t>(first_mb * 1048576.0);
    return std::make_unique<GradBuckets>(ctx, m.parameters(), c, o);
  };
  // Each variant binds the gradients to its own buffers: rebind before use.
  struct Variant {
    std::string name;
    double bucket_mb, first_mb;
    bool attach;
  };
  const std::vector<Variant> variants = {{"overlap 25 MiB (first 1)", 25, 1, true},
                                         {"one all-reduce after backward", 1e6, 1e6, false},
                                         {"overlap 1 MiB", 1, 1, true},
                                         {"overlap 5 MiB (first 1)", 5, 1, true},
                                         {"overlap 100 MiB (first 1)", 100, 1, true}};
  int64_t grad_elems = 0;
  for (Parameter* p : m.parameters()) grad_elems += p->trainable ? p->value.numel() : 0;
  Tensor flat = Tensor::zeros({grad_elems});
  const size_t nv = variants.size();
  std::vector<std::vector<double>> t(nv + 2), fin(nv + 1);
  for (int r = 0; r < a.rounds + 1; ++r) {  // round 0 warms up
    // The order rotates every round so no variant always runs first or last.
    for (size_t k = 0; k < nv + 1; ++k) {
      const size_t v = (k + static_cast<size_t>(r)) % (nv + 1);
      Timing x;
      if (v < nv) {
        auto b = make(variants[v].bucket_mb, variants[v].first_mb);
        x = backward_sync(ctx, m, b.get(), variants[v].attach, tok, tgt, c);
      } else {
        x = backward_sync(ctx, m, nullptr, false, tok, tgt, c);  // none
      }
      if (r > 0) {
        t[v].push_back(x.total);
        fin[v].push_back(x.finish);
      }
    }
    c.barrier().wait();
    const double t0 = now_s();
    c.all_reduce(flat, ReduceOp::Sum).wait();  // the communication alone
    const double ct = max_over(c, now_s() - t0);
    if (r > 0) t[nv + 1].push_back(ct);
  }
  const double none = median(t[nv]), comm = median(t[nv + 1]);
  if (c.rank() == 0) {
    std::printf(
        "bench_dp sync: %d ranks x %d threads, %s %.1fM params (%.1f MiB of f32 "
        "gradients), micro-batch %d x %d, median of %d interleaved rounds\n",
        c.size(), omp_get_max_threads(), cfg.model.family.c_str(),
        static_cast<double>(grad_elems) / 1e6, 4.0 * grad_elems / 1048576.0, B, T, a.rounds);
    std::printf("%-32s %11s %11s %12s %9s\n", "variant", "bwd+sync s", "vs none", "in finish s",
                "exposed");
    std::printf("%-32s %11.4f %11s %12s %9s\n", "no communication", none, "-", "-", "-");
    for (size_t v = 0; v < nv; ++v) {
      const double x = median(t[v]), f = median(fin[v]);
      std::printf("%-32s %11.4f %+10.4fs %12.4f %8.0f%%\n", variants[v].name.c_str(), x, x - none,
                  f, 100.0 * f / comm);
    }
    std::printf("%-32s %11.4f  (all-reduce of all gradients, nothing else running)\n",
                "communication alone", comm);
    std::printf("exposed = time left in finish() after the backward / communication alone\n");
  }
  return 0;
}

int run_train(World& w, const Args& a, const RunConfig& cfg) {
  ExecContext ctx;
  Transformer m(ctx, cfg.model);
  m.init_weights();
  Communicator& c = w.world();
  std::unique_ptr<GradBuckets> buckets;
  if (c.size() > 1) {
    GradBucketOptions o;  // 25 MiB, first 1 MiB: the trainer's defaults
    buckets = std::make_unique<GradBuckets>(ctx, m.parameters(), c, o);
  }
  AdamW opt(ctx, m.parameters(), cfg.optim);
  const int B = cfg.data.micro_batch, T = cfg.data.seq_len;
  const double tokens = static_cast<double>(B) * T * a.accum * c.size();
  std::vector<double> times, in_finish;
  for (int s = 0; s < a.steps + 1; ++s) {
    c.barrier().wait();
    const double t0 = now_s();
    m.zero_grad(ctx);
    if (buckets) buckets->begin_step(a.accum);
    for (int k = 0; k < a.accum; ++k) {
      MicroBatch mb(ctx);
      if (buckets) buckets->attach(mb);
      m.forward_backward(mb, random_tokens(B, T, cfg.model.vocab_size, 7 * s + k + 31 * c.rank()),
                         random_tokens(B, T, cfg.model.vocab_size, 9 * s + k + 37 * c.rank()),
                         static_cast<float>(1.0 / tokens));
    }
    const double f0 = now_s();
    if (buckets) buckets->finish();
    const double fin = max_over(c, now_s() - f0);
    opt.clip(global_grad_norm(ctx, m.parameters()), 1.0f);
    opt.step(1e-4f);
    const double dt = max_over(c, now_s() - t0);
    if (s > 0) {  // step 0 warms up
      times.push_back(dt);
      in_finish.push_back(fin);
    }
  }
  if (c.rank() == 0)
    std::printf(
        "bench_dp train: %d ranks x %d threads, global batch %.0f tokens (micro-batch %d "
        "x %d x accum %d x %d ranks): median step %.4f s, %.0f tokens/s; exposed all-reduce "
        "(in finish() after the backward, slowest rank) %.4f s = %.1f %% of the step\n",
        c.size(), omp_get_max_threads(), tokens, B, T, a.accum, c.size(), median(times),
        tokens / median(times), median(in_finish), 100.0 * median(in_finish) / median(times));
  return 0;
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  braid::Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", s.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (s == "sync" || s == "train")
      a.mode = s;
    else if (s == "--config")
      a.config = next();
    else if (s == "--rounds")
      a.rounds = std::stoi(next());
    else if (s == "--steps")
      a.steps = std::stoi(next());
    else if (s == "--accum")
      a.accum = std::stoi(next());
    else {
      std::fprintf(stderr,
                   "usage: bench_dp sync|train [--config F] [--rounds N] [--steps N] "
                   "[--accum A]\n");
      return 2;
    }
  }
  try {
    const braid::RunConfig cfg = braid::load_run_config(a.config, {});
    braid::World w(&argc, &argv);
    return a.mode == "sync" ? braid::run_sync(w, a, cfg) : braid::run_train(w, a, cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_dp: %s\n", e.what());
    return 1;
  }
}
