// Fits the H100 efficiency constants of the planner's time model on the "fit" runs of
// tests/data/h100_runs.json and reports the error of every run, fit and held out
// (docs/plan.md, "H100 validation"). Not part of ctest; test_plan_h100_validation.cpp checks
// the result.
//   fit_h100_efficiency [runs.json]           errors with the built-in h100-sxm constants
//   fit_h100_efficiency [runs.json] --fit     search the constants on the fit runs only
//   fit_h100_efficiency [runs.json] --explain ID   one run's predicted step, term by term
//   ... --set SOURCE KEY=VALUE   a what-if: every run of SOURCE with KEY set (repeatable)
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "launch/plan/gpu_table.h"
#include "launch/plan/published_runs.h"
#include "launch/plan/time_model.h"

using namespace braid::plan;

namespace {

struct SetError {
  double mean_abs = 0, mean = 0, worst = 0;
  int n = 0;
};

SetError set_error(const std::vector<PublishedRun>& runs, const GpuSpec& g, const char* set) {
  SetError e;
  for (const PublishedRun& r : runs) {
    if (r.set != set) continue;
    const double err = relative_error(r, g);
    e.mean_abs += std::abs(err);
    e.mean += err;
    if (std::abs(err) > std::abs(e.worst)) e.worst = err;
    ++e.n;
  }
  if (e.n) {
    e.mean_abs /= e.n;
    e.mean /= e.n;
  }
  return e;
}

// What the fit minimises: the mean squared log ratio over the fit runs (a run 20 % slow and
// one 20 % fast weigh the same, whatever their metric's units).
double loss(const std::vector<PublishedRun>& runs, const GpuSpec& g) {
  double s = 0;
  int n = 0;
  for (const PublishedRun& r : runs) {
    if (r.set != "fit") continue;
    const double l = std::log1p(relative_error(r, g));
    s += l * l;
    ++n;
  }
  return s / n;
}

void print_runs(const std::vector<PublishedRun>& runs, const GpuSpec& g) {
  std::printf(
      "| run | set | metric | reported | predicted | error |\n| --- | --- | --- | ---: | ---: | "
      "---: |\n");
  for (const PublishedRun& r : runs) {
    const double err = relative_error(r, g);
    // The metric's own value: a step time is the reported one divided by the speed ratio.
    const double predicted = r.metric == "step_s" ? r.reported / (1 + err) : r.reported * (1 + err);
    std::printf("| %s | %s | %s | %.4g | %.4g | %+.1f%%", r.id.c_str(), r.set.c_str(),
                r.metric.c_str(), r.reported, predicted, 100 * err);
    if (r.peak_low_tflops > 0) {
      // A bracketed peak: the error at each end (the distance to the interval is the error).
      const auto [low, high] = relative_error_range(r, g);
      auto value = [&](double e) {
        return r.metric == "step_s" ? r.reported / (1 + e) : r.reported * (1 + e);
      };
      std::printf(" (%+.1f%% at %s's peak: %.4g; %+.1f%% at %s's: %.4g)", 100 * low,
                  r.peak_low_gpu.c_str(), value(low), 100 * high, g.name.c_str(), value(high));
    }
    std::printf(" |\n");
  }
  for (const char* set : {"fit", "heldout"}) {
    const SetError e = set_error(runs, g, set);
    std::printf("%s: %d runs, mean |error| %.1f%%, mean error %+.1f%%, worst %+.1f%%\n", set, e.n,
                100 * e.mean_abs, 100 * e.mean, 100 * e.worst);
  }
}

// Nelder-Mead over (matmul_efficiency, attention_efficiency, elementwise_touches), each kept
// in its physical range; restarted from the best point until it stops improving.
GpuSpec fit_constants(const std::vector<PublishedRun>& runs, GpuSpec g) {
  using P = std::array<double, 3>;
  const P lo = {0.2, 0.05, 0.0}, hi = {1.0, 1.0, 64.0};
  auto clamp = [&](P x) {
    for (int i = 0; i < 3; ++i) x[i] = std::min(hi[i], std::max(lo[i], x[i]));
    return x;
  };
  auto at = [&](const P& x) {
    GpuSpec s = g;
    s.matmul_efficiency = x[0];
    s.attention_efficiency = x[1];
    s.elementwise_touches = x[2];
    return s;
  };
  auto f = [&](const P& x) { return loss(runs, at(clamp(x))); };
  P best = {g.matmul_efficiency,
            g.attention_efficiency > 0 ? g.attention_efficiency : g.matmul_efficiency,
            g.elementwise_touches};
  double best_f = f(best);
  for (int restart = 0; restart < 8; ++restart) {
    std::array<P, 4> v;
    std::array<double, 4> fv;
    v[0] = best;
    const P step = {0.05, 0.05, 2.0};
    for (int i = 0; i < 3; ++i) {
      v[i + 1] = best;
      v[i + 1][i] += step[i];
    }
    for (int i = 0; i < 4; ++i) fv[i] = f(v[i]);
    for (int it = 0; it < 400; ++it) {
      std::array<int, 4> o = {0, 1, 2, 3};
      std::sort(o.begin(), o.end(), [&](int a, int b) { return fv[a] < fv[b]; });
      P c = {0, 0, 0};
      for (int k = 0; k < 3; ++k)
        for (int i = 0; i < 3; ++i) c[i] += v[o[k]][i] / 3.0;
      auto along = [&](double t) {
        P x;
        for (int i = 0; i < 3; ++i) x[i] = c[i] + t * (v[o[3]][i] - c[i]);
        return x;
      };
      const P r = along(-1.0);
      const double fr = f(r);
      if (fr < fv[o[0]]) {
        const P e = along(-2.0);
        const double fe = f(e);
        v[o[3]] = fe < fr ? e : r;
        fv[o[3]] = std::min(fe, fr);
      } else if (fr < fv[o[2]]) {
        v[o[3]] = r;
        fv[o[3]] = fr;
      } else {
        const P k = along(0.5);
        const double fk = f(k);
        if (fk < fv[o[3]]) {
          v[o[3]] = k;
          fv[o[3]] = fk;
        } else {
          for (int j = 1; j < 4; ++j) {
            for (int i = 0; i < 3; ++i) v[o[j]][i] = 0.5 * (v[o[j]][i] + v[o[0]][i]);
            fv[o[j]] = f(v[o[j]]);
          }
        }
      }
    }
    const int b = static_cast<int>(std::min_element(fv.begin(), fv.end()) - fv.begin());
    const bool improved = fv[b] < best_f - 1e-9;
    if (fv[b] < best_f) {
      best_f = fv[b];
      best = clamp(v[b]);
    }
    if (!improved) break;
  }
  return at(clamp(best));
}

// One run's prediction term by term (seconds per step), to see which mechanism dominates.
int explain_run(const std::vector<PublishedRun>& runs, const GpuSpec& g, const std::string& id) {
  for (const PublishedRun& r : runs) {
    if (r.id != id) continue;
    Cluster c = r.cluster;
    c.gpu = g;
    if (r.mem_bw_gbs > 0) c.gpu.mem_bw_gbs = r.mem_bw_gbs;
    const PlanResult p = predict(r.model, r.train, r.layout, c);
    const TimeBreakdown& t = p.time;
    std::printf(
        "%s: %d micro-batches; step %.4f s = compute %.4f + tp %.4f + cp %.4f + bubble %.4f + "
        "p2p %.4f + dp exposed %.4f + param gather %.4f + optimizer %.4f\n"
        "predicted %.4g %s, published %.4g (error %+.1f%%)\n",
        r.id.c_str(), p.micro_batches, t.step(), t.compute, t.tp_comm, t.cp_comm, t.bubble, t.p2p,
        t.dp_exposed, t.param_gather, t.optimizer, predicted_metric(r, p), r.metric.c_str(),
        r.reported, 100 * relative_error(r, g));
    if (r.peak_low_tflops > 0)
      std::printf(
          "(the peak is only bracketed: %s's %.1f TFLOP/s to %.1f; these figures are at "
          "the upper end)\n",
          r.peak_low_gpu.c_str(), r.peak_low_tflops, peak_tflops(c.gpu, r.train.precision));
    // The compute's parts: the element-wise passes and the attention core, by removing each.
    GpuSpec no_elt = c.gpu;
    no_elt.elementwise_touches = 0;
    Cluster c2 = c;
    c2.gpu = no_elt;
    const double no_elt_s = predict(r.model, r.train, r.layout, c2).time.compute;
    c2.gpu.attention_efficiency = 1e9;
    const double gemm_s = predict(r.model, r.train, r.layout, c2).time.compute;
    std::printf("compute: element-wise %.4f, attention core %.4f, GEMMs and LM head %.4f\n",
                t.compute - no_elt_s, no_elt_s - gemm_s, gemm_s);
    return 0;
  }
  std::fprintf(stderr, "error: no run '%s' in the file\n", id.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string path = "tests/data/h100_runs.json";  // run from the repository root
    bool fit = false;
    std::string explain;
    std::vector<RunOverride> overrides;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--fit")
        fit = true;
      else if (a == "--explain" && i + 1 < argc)
        explain = argv[++i];
      else if (a == "--set" && i + 2 < argc) {
        const std::string source = argv[++i], kv = argv[++i];
        const size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
          throw braid::UserError("--set " + source + " '" + kv + "': expected KEY=VALUE");
        overrides.push_back({source, kv.substr(0, eq), kv.substr(eq + 1)});
      } else
        path = a;
    }
    const std::vector<PublishedRun> runs = load_published_runs(path, overrides);
    GpuSpec g = find_gpu("h100-sxm");
    if (!explain.empty()) return explain_run(runs, g, explain);
    for (const PublishedRun& r : runs)
      if (r.published_params > 0 && r.published_params != r.model.num_params())
        std::printf("note: %s has %lld parameters in the planner, %lld published\n", r.id.c_str(),
                    static_cast<long long>(r.model.num_params()),
                    static_cast<long long>(r.published_params));
    std::printf("built-in constants: matmul_efficiency %.3f, loss %.4f\n", g.matmul_efficiency,
                loss(runs, g));
    if (fit) {
      g = fit_constants(runs, g);
      std::printf(
          "fitted on the fit runs: matmul_efficiency %.3f, attention_efficiency %.3f, "
          "elementwise_touches %.2f, loss %.4f\n",
          g.matmul_efficiency, g.attention_efficiency, g.elementwise_touches, loss(runs, g));
    }
    print_runs(runs, g);
    return 0;
  } catch (const braid::UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
