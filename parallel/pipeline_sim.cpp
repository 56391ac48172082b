// Pipeline schedule simulator.
#include "parallel/pipeline_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/error.h"

namespace braid {

double SimResult::mean_idle_fraction() const {
  double s = 0;
  for (const StageResult& r : stages) s += r.idle_fraction;
  return stages.empty() ? 0 : s / static_cast<double>(stages.size());
}

namespace {

// A message in flight: (kind: 0 activation / 1 grad, mb, virtual stage of the receiver, to).
using MsgKey = std::tuple<int, int, int, int>;
// A piece of work done on a stage: (type, mb, chunk).
using DoneKey = std::tuple<int, int, int>;

struct StageState {
  size_t next = 0;
  double clock = 0;
  std::set<DoneKey> done;  // compute actions finished (and receives landed)
  std::set<std::pair<int, int>> in_flight, stashed;  // (mb, chunk)
};

DoneKey key(ActionType t, int mb, int chunk) { return {static_cast<int>(t), mb, chunk}; }

}  // namespace

SimResult simulate_pipeline(const PipelineSchedule& ps, const StageCosts& costs) {
  const int p = ps.spec.stages;
  const bool split_backward = ps.spec.kind == ScheduleKind::ZbH1;
  const int last_vs = ps.num_virtual_stages() - 1;
  std::vector<StageState> st(static_cast<size_t>(p));
  SimResult res;
  res.stages.resize(static_cast<size_t>(p));
  std::map<MsgKey, double> arrived;  // message -> time its data is available

  auto fail = [&](int s, const Action& a, const std::string& why) {
    BRAID_CHECK(false, "{} schedule (p={}, m={}, v={}), stage {}, action {}: {}",
                schedule_kind_name(ps.spec.kind), p, ps.spec.micro_batches, ps.spec.virtual_stages,
                s, action_str(a), why);
  };
  auto require = [&](int s, const Action& a, ActionType t, int chunk, const char* what) {
    if (!st[static_cast<size_t>(s)].done.count(key(t, a.mb, chunk))) fail(s, a, what);
  };

  for (;;) {
    bool progressed = false, unfinished = false;
    for (int s = 0; s < p; ++s) {
      StageState& S = st[static_cast<size_t>(s)];
      const std::vector<Action>& row = ps.stages[static_cast<size_t>(s)];
      StageResult& R = res.stages[static_cast<size_t>(s)];
      while (S.next < row.size()) {
        const Action& a = row[S.next];
        int vs = ps.virtual_stage(s, a.chunk);
        double start = S.clock, dur = 0;
        switch (a.type) {
          case ActionType::RecvActivation:
          case ActionType::RecvGrad: {
            int kind = a.type == ActionType::RecvActivation ? 0 : 1;
            auto it = arrived.find({kind, a.mb, vs, s});
            if (it == arrived.end()) goto blocked;
            start = std::max(S.clock, it->second);
            arrived.erase(it);
            break;
          }
          case ActionType::SendActivation:
          case ActionType::SendGrad: {
            bool act = a.type == ActionType::SendActivation;
            require(s, a, act ? ActionType::Forward : ActionType::Backward, a.chunk,
                    "sends data its stage has not computed yet");
            int to_vs = act ? vs + 1 : vs - 1;
            if (to_vs < 0 || to_vs > last_vs || to_vs % p != a.peer)
              fail(s, a,
                   fmt::format("the neighbour of virtual stage {} is not stage {}", vs, a.peer));
            dur = costs.p2p;
            arrived[{act ? 0 : 1, a.mb, to_vs, a.peer}] = start + dur;
            break;
          }
          case ActionType::Forward:
            if (vs > 0)
              require(s, a, ActionType::RecvActivation, a.chunk, "its input was not received");
            dur = costs.forward;
            S.in_flight.insert({a.mb, a.chunk});
            S.stashed.insert({a.mb, a.chunk});
            break;
          case ActionType::Backward:
            require(s, a, ActionType::Forward, a.chunk, "runs before its forward");
            if (vs < last_vs)
              require(s, a, ActionType::RecvGrad, a.chunk, "its output gradient was not received");
            dur = split_backward ? costs.backward_input : costs.backward;
            S.in_flight.erase({a.mb, a.chunk});
            if (!split_backward) S.stashed.erase({a.mb, a.chunk});
            break;
          case ActionType::Weight:
            if (!split_backward) fail(s, a, "W actions exist only in zb-h1");
            require(s, a, ActionType::Backward, a.chunk, "runs before its input-gradient backward");
            dur = costs.weight;
            S.stashed.erase({a.mb, a.chunk});
            break;
        }
        if (!S.done.insert(key(a.type, a.mb, a.chunk)).second) fail(s, a, "appears twice");
        if (is_compute(a.type)) R.busy += dur;
        S.clock = start + dur;
        R.timeline.push_back({a, start, start + dur});
        R.peak_in_flight = std::max(R.peak_in_flight, static_cast<int>(S.in_flight.size()));
        R.peak_stashed = std::max(R.peak_stashed, static_cast<int>(S.stashed.size()));
        ++S.next;
        progressed = true;
      }
      continue;
    blocked:
      unfinished = true;
    }
    if (!unfinished) break;
    if (!progressed) {
      std::string waits;
      for (int s = 0; s < p; ++s) {
        const StageState& S = st[static_cast<size_t>(s)];
        if (S.next < ps.stages[static_cast<size_t>(s)].size())
          waits += fmt::format(" stage {} at {};", s,
                               action_str(ps.stages[static_cast<size_t>(s)][S.next]));
      }
      BRAID_CHECK(false, "{} schedule (p={}, m={}): deadlock, every stage waits:{}",
                  schedule_kind_name(ps.spec.kind), p, ps.spec.micro_batches, waits);
    }
  }
  BRAID_CHECK(arrived.empty(), "{} schedule: {} messages sent but never received",
              schedule_kind_name(ps.spec.kind), arrived.size());
  // Every (mb, chunk) must run F, B (and W) exactly once on every stage.
  for (int s = 0; s < p; ++s) {
    const StageState& S = st[static_cast<size_t>(s)];
    for (int mb = 0; mb < ps.spec.micro_batches; ++mb)
      for (int c = 0; c < ps.spec.virtual_stages; ++c)
        for (ActionType t : {ActionType::Forward, ActionType::Backward, ActionType::Weight}) {
          if (t == ActionType::Weight && !split_backward) continue;
          BRAID_CHECK(S.done.count(key(t, mb, c)), "{} schedule: stage {} never runs {}",
                      schedule_kind_name(ps.spec.kind), s, action_str({t, mb, c, -1}));
        }
    res.makespan = std::max(res.makespan, S.clock);
    res.stages[static_cast<size_t>(s)].end = S.clock;
  }
  for (StageResult& r : res.stages)
    r.idle_fraction = res.makespan > 0 ? (res.makespan - r.busy) / res.makespan : 0;
  return res;
}

}  // namespace braid
