// Fits the H100 efficiency constants of the planner's time model on the "fit" runs of
// tests/data/h100_runs.json and reports the error of every run, fit and held out
// (docs/plan.md, "H100 validation"). Not part of ctest; test_plan_h100_validation.cpp checks
// the result.
//   fit_h100_efficiency [runs.json]           errors with the built-in h100-sxm constants
//   fit_h100_efficiency [runs.json] --fit     search the constants on the fit runs only
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "launch/plan/gpu_table.h"
#include "launch/plan/published_runs.h"

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
    std::printf("| %s | %s | %s | %.4g | %.4g | %+.1f%% |\n", r.id.c_str(), r.set.c_str(),
                r.metric.c_str(), r.reported, predicted, 100 * err);
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

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string path = "tests/data/h100_runs.json";  // run from the repository root
    bool fit = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--fit")
        fit = true;
      else
        path = a;
    }
    const std::vector<PublishedRun> runs = load_published_runs(path);
    GpuSpec g = find_gpu("h100-sxm");
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
