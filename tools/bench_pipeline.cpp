// bench_pipeline: the pipeline executor and tensor parallelism on a real (small) model.
//   mpirun -np P bench_pipeline pipeline [--steps N]
//       pp = P: measured bubble per schedule for m = 4, 8, 16 against (p-1)/(m+p-1), and the
//       peak activation bytes per stage (the ExecContext allocator's Activations peak).
//       --trace out.json [--schedule 1f1b --m 8]: also writes that run's timeline, every rank
//       in one Chrome trace file (tools/plot_trace.py draws it).
//   mpirun -np T bench_pipeline tp [--steps N]   (T = 1 or 2; same total threads)
//       one micro-batch's forward + backward time with tp = T, and the share of it spent in
//       the tensor-parallel collectives.
// Times are medians over the steps after one warm-up step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/models/transformer.h"
#include "parallel/pipeline_executor.h"
#include "parallel/tensor_parallel.h"
#include "parallel/world.h"
#include "tools/bench_cli.h"

namespace {
using namespace braid;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

ModelConfig bench_model() {
  ModelConfig c;
  c.family = "llama";
  c.vocab_size = 512;
  c.context_length = 64;
  c.n_layer = 8;
  c.n_embd = 128;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.ffn_hidden = 384;
  c.seed = 3;
  return c;
}

Tensor tokens(const ModelConfig& c, int64_t B, int64_t T, uint64_t seed) {
  Tensor t = Tensor::empty({B, T}, DType::I32);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.i32()[i] = static_cast<int32_t>(mix64(seed * 7919 + i) % c.vocab_size);
  return t;
}

// All members' values of x on group rank 0 (in rank order).
std::vector<float> gather(Communicator& c, float x) {
  Tensor mine = Tensor::from_vector({x}, {1}), all = Tensor::empty({c.size()});
  c.all_gather(mine, all).wait();
  return std::vector<float>(all.f32(), all.f32() + c.size());
}

struct TraceRequest {
  const char* path = nullptr;
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int m = 8;
  int vocab = 0;  // > 0: the model's vocabulary (a small one makes the last stage's head cheap)
};

void bench_pipeline(World& w, int steps, const TraceRequest& tr) {
  const int p = w.size();
  ModelConfig cfg = bench_model();
  cfg.n_embd = 256;  // a few ms per micro-batch and stage, so p2p latency is small beside it
  cfg.ffn_hidden = 768;
  cfg.context_length = 128;
  if (tr.vocab > 0) cfg.vocab_size = tr.vocab;
  MeshComms mc = w.build_mesh(Mesh::resolve(1, 1, p, p));
  const int64_t B = 1, T = 128;
  if (w.rank() == 0)
    std::printf("pp=%d, llama n_layer=%d n_embd=%d vocab=%d, micro-batch %lldx%lld, %d steps\n", p,
                cfg.n_layer, cfg.n_embd, cfg.vocab_size, static_cast<long long>(B),
                static_cast<long long>(T), steps);
  if (w.rank() == 0)
    std::printf("%-18s %3s %3s %9s %9s %9s   %s\n", "schedule", "m", "v", "bubble", "theory",
                "max/min", "peak activations per stage (MiB)");
  for (int m : {4, 8, 16})
    for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                           ScheduleKind::Interleaved1F1B, ScheduleKind::ZbH1}) {
      const int v = k == ScheduleKind::Interleaved1F1B ? 2 : 1;
      const PipelineSchedule ps = build_pipeline_schedule({k, p, m, v, cfg.n_layer});
      ExecContext ctx;
      std::vector<std::unique_ptr<Transformer>> chunks;
      std::vector<Transformer*> ptrs;
      for (int c = 0; c < v; ++c) {
        chunks.push_back(std::make_unique<Transformer>(
            ctx, cfg, pipeline_block_range(cfg.n_layer, p * v, ps.virtual_stage(mc.coord.pp, c))));
        chunks.back()->init_weights();
        ptrs.push_back(chunks.back().get());
      }
      PipelineExecutorOptions eo;
      eo.trace = tr.path && tr.kind == k && tr.m == m;
      PipelineExecutor ex(ctx, ps, mc.coord.pp, ptrs, mc.pp, mc.embedding, eo);
      PipelineStepInput in{{}, {}, B, T, 1.0f / static_cast<float>(m * B * T)};
      for (int i = 0; i < m; ++i) {
        in.tokens.push_back(tokens(cfg, B, T, 2 * i + 1));
        in.targets.push_back(tokens(cfg, B, T, 2 * i + 2));
      }
      std::vector<double> bubbles;
      double peak = 0;
      for (int s = 0; s <= steps; ++s) {
        for (auto& c : chunks) c->zero_grad(ctx);
        ctx.allocator().reset_peaks();
        const PipelineStepResult r = ex.step(in);
        if (s == 0) continue;  // warm-up
        bubbles.push_back(r.bubble());
        peak = std::max<double>(
            peak, ctx.allocator().stats().peak_bytes[static_cast<int>(MemCategory::Activations)]);
      }
      if (eo.trace) {
        const std::vector<TraceEvent> all = gather_trace(w.world(), ex.trace());
        if (w.rank() == 0) write_chrome_trace(tr.path, all);
      }
      // The step's bubble: the mean over stages of each stage's idle share.
      const std::vector<float> b = gather(*mc.pp, static_cast<float>(median(bubbles)));
      const std::vector<float> mem = gather(*mc.pp, static_cast<float>(peak / (1 << 20)));
      if (w.rank() != 0) continue;
      double mean = 0;
      for (float x : b) mean += x / p;
      const double theory = (p - 1.0) / (m + p - 1.0);
      const auto [lo, hi] = std::minmax_element(b.begin(), b.end());
      std::printf("%-18s %3d %3d %9.3f %9.3f %9.2f  ", schedule_kind_name(k), m, v, mean, theory,
                  *lo > 0 ? *hi / *lo : 0.0);
      for (float x : mem) std::printf(" %6.2f", x);
      std::printf("\n");
    }
}

// Forwards every call to `inner`, waiting at once and timing it (the tensor-parallel layers
// wait for each collective right away, so this changes no overlap).
class TimedCommunicator final : public Communicator {
 public:
  explicit TimedCommunicator(Communicator& inner)
      : Communicator(inner.name(), inner.world_ranks(), inner.rank(), inner.timeout_s()),
        inner_(inner) {}
  double seconds = 0;
  Work all_reduce(Tensor t, ReduceOp op) override { return timed(inner_.all_reduce(t, op)); }
  Work reduce_scatter(Tensor in, Tensor out, ReduceOp op) override {
    return timed(inner_.reduce_scatter(in, out, op));
  }
  Work all_gather(Tensor in, Tensor out) override { return timed(inner_.all_gather(in, out)); }
  Work broadcast(Tensor t, int root) override { return timed(inner_.broadcast(t, root)); }
  Work send(Tensor t, int peer, int tag) override { return timed(inner_.send(t, peer, tag)); }
  Work recv(Tensor t, int peer, int tag) override { return timed(inner_.recv(t, peer, tag)); }
  Work barrier() override { return timed(inner_.barrier()); }

 private:
  Work timed(Work w) {
    const double t0 = now_s();
    w.wait();
    seconds += now_s() - t0;
    return Work::completed();
  }
  Communicator& inner_;
};

void bench_tp(World& w, int steps) {
  ModelConfig cfg = bench_model();
  cfg.n_embd = 256;
  cfg.ffn_hidden = 768;
  cfg.vocab_size = 2048;
  const int64_t B = 4, T = 64;
  ExecContext ctx;
  Transformer model(ctx, cfg);
  model.init_weights();
  TimedCommunicator tp(w.world());
  apply_tensor_parallel(ctx, model, tp);
  const Tensor tok = tokens(cfg, B, T, 1), tgt = tokens(cfg, B, T, 2);
  std::vector<double> step_s, comm_s;
  for (int s = 0; s <= steps; ++s) {
    model.zero_grad(ctx);
    w.world().barrier().wait();
    tp.seconds = 0;
    const double t0 = now_s();
    MicroBatch mb(ctx);
    model.forward_backward(mb, tok, tgt, 1.0f / (B * T));
    const double dt = now_s() - t0;
    if (s == 0) continue;
    step_s.push_back(dt);
    comm_s.push_back(tp.seconds);
  }
  const double st = median(step_s), cm = median(comm_s);
  const std::vector<float> all = gather(w.world(), static_cast<float>(st));
  if (w.rank() == 0)
    std::printf(
        "tp=%d OMP_NUM_THREADS=%s llama n_layer=%d n_embd=%d ffn=%d vocab=%d, batch "
        "%lldx%lld: step %.2f ms (slowest rank %.2f ms), tp collectives %.2f ms "
        "(%.0f%%)\n",
        w.size(), std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "?",
        cfg.n_layer, cfg.n_embd, cfg.ffn_hidden, cfg.vocab_size, static_cast<long long>(B),
        static_cast<long long>(T), st * 1e3, *std::max_element(all.begin(), all.end()) * 1e3,
        cm * 1e3, 100.0 * cm / st);
}

}  // namespace

int main(int argc, char** argv) {
  braid::World world(&argc, &argv);
  try {
    std::string mode, trace_path, schedule = "1f1b";
    int steps = 5;
    TraceRequest tr;
    CLI::App app{"bench_pipeline: pipeline bubbles and activation peaks, or tp step time",
                 "bench_pipeline"};
    app.option_defaults()->always_capture_default();
    app.add_option("mode", mode, "pipeline (pp = ranks) or tp (tp = ranks, 1 or 2)")
        ->required()
        ->check(CLI::IsMember({"pipeline", "tp"}));
    app.add_option("--steps", steps, "timed steps after one warm-up step");
    app.add_option("--vocab", tr.vocab, "the model's vocabulary (0: the benchmark model's)");
    app.add_option("--trace", trace_path, "pipeline: write this run's timeline (Chrome trace)");
    app.add_option("--schedule", schedule,
                   "the traced schedule: gpipe, 1f1b, interleaved-1f1b or zb-h1");
    app.add_option("--m", tr.m, "the traced run's micro-batches");
    if (const std::optional<int> code = bench::parse_args(app, argc, argv)) return *code;
    BRAID_USER_CHECK(parse_schedule_kind(schedule, &tr.kind),
                     "--schedule {}: expected gpipe, 1f1b, interleaved-1f1b or zb-h1", schedule);
    if (!trace_path.empty()) tr.path = trace_path.c_str();
    if (mode == "pipeline")
      bench_pipeline(world, steps, tr);
    else
      bench_tp(world, steps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pipeline: %s\n", e.what());
    return 1;
  }
  return 0;
}
