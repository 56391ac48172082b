// Exhaustive layout search over a small grid (a few thousand predictions at most).
#include "launch/plan/search.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "launch/plan/memory_model.h"
#include "launch/plan/time_model.h"

namespace braid::plan {

namespace {

// Which time component differs most from the best plan's.
std::string loss_reason(const PlanResult& p, const PlanResult& best) {
  struct Part {
    const char* name;
    double d;
  } parts[] = {{"compute (recompute or small GEMMs)", p.time.compute - best.time.compute},
               {"tensor-parallel communication", p.time.tp_comm - best.time.tp_comm},
               {"pipeline bubble", p.time.bubble - best.time.bubble},
               {"pipeline p2p", p.time.p2p - best.time.p2p},
               {"context-parallel communication", p.time.cp_comm - best.time.cp_comm},
               {"exposed ZeRO parameter all-gathers", p.time.param_gather - best.time.param_gather},
               {"exposed data-parallel communication", p.time.dp_exposed - best.time.dp_exposed},
               {"optimizer step", p.time.optimizer - best.time.optimizer}};
  const Part* worst = &parts[0];
  for (const Part& q : parts)
    if (q.d > worst->d) worst = &q;
  const double slower = p.time.step() / best.time.step() - 1.0;
  return fmt::format("{:.1f}% slower, mostly more {} (+{:.3g} s/step)", 100 * slower, worst->name,
                     worst->d);
}

}  // namespace

SearchResult search_layouts(const ModelConfig& m, const TrainOptions& t, const Cluster& c,
                            int keep) {
  SearchResult out;
  std::vector<PlanResult> fitting;
  const int n = c.total_gpus();
  for (int tp = 1; tp <= c.gpus_per_node && tp <= n; tp *= 2) {
    if (m.n_head % tp != 0 || m.kv_heads() % tp != 0 || n % tp != 0) continue;
    for (int pp = 1; pp <= m.n_layer && tp * pp <= n; ++pp) {
      if ((n / tp) % pp != 0) continue;
      const int dp = n / (tp * pp);
      for (int vp : {1, 2, 4}) {
        if (vp > 1 && (pp == 1 || m.n_layer % (pp * vp) != 0)) continue;
        for (int mb : {1, 2, 4, 8, 16}) {
          if (t.global_batch % (static_cast<int64_t>(dp) * mb) != 0) continue;
          for (Checkpointing ck :
               {Checkpointing::None, Checkpointing::Selective, Checkpointing::Full}) {
            for (int zero : {0, 1, 2, 3}) {
              if (zero >= 1 && dp == 1) continue;
              Layout l{dp, tp, pp, vp, vp > 1 ? "interleaved" : "1f1b"};
              TrainOptions o = t;
              o.micro_batch = mb;
              o.checkpointing = ck;
              o.zero = zero;
              ++out.tried;
              PlanResult r;
              try {
                r = predict(m, o, l, c);
              } catch (const UserError&) {
                ++out.rejected_invalid;  // e.g. interleaving with fewer micro-batches than a
                                         // multiple of pp
                continue;
              }
              if (!r.fits) {
                ++out.rejected_memory;
                continue;
              }
              fitting.push_back(std::move(r));
            }
          }
        }
      }
    }
  }
  std::sort(fitting.begin(), fitting.end(),
            [](const PlanResult& a, const PlanResult& b) { return a.time.step() < b.time.step(); });
  for (size_t i = 0; i < fitting.size() && static_cast<int>(i) < keep; ++i) {
    RankedPlan rp{fitting[i], ""};
    if (i == 0) {
      const double free_gib = (rp.plan.capacity_bytes - rp.plan.memory.total()) / kGiB;
      rp.reason = fmt::format("fastest layout that fits ({:.1f} GiB to spare, bubble {:.1f}%)",
                              free_gib, 100 * rp.plan.time.bubble / rp.plan.time.step());
    } else {
      rp.reason = loss_reason(fitting[i], fitting[0]);
    }
    out.best.push_back(std::move(rp));
  }
  return out;
}

}  // namespace braid::plan
