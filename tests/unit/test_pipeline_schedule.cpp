// Pipeline schedule tables, checked in the unit-time simulator without running a model.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/pipeline_sim.h"

namespace braid {
namespace {

PipelineSchedule make(ScheduleKind k, int p, int m, int v = 1) {
  ScheduleSpec s;
  s.kind = k;
  s.stages = p;
  s.micro_batches = m;
  s.virtual_stages = v;
  return build_pipeline_schedule(s);
}

// Checks the data dependencies from the simulated times directly (not from the simulator's
// own bookkeeping): F of virtual stage j after F of j - 1, B of j after B of j + 1 (and after
// the last F), B after its F, W after its B.
void expect_dependencies(const PipelineSchedule& ps, const SimResult& r) {
  using K = std::tuple<int, int, int>;  // (type, mb, virtual stage)
  std::map<K, std::pair<double, double>> t;
  for (int s = 0; s < ps.spec.stages; ++s)
    for (const TimedAction& a : r.stages[static_cast<size_t>(s)].timeline)
      if (is_compute(a.action.type))
        t[{static_cast<int>(a.action.type), a.action.mb, ps.virtual_stage(s, a.action.chunk)}] = {
            a.start, a.end};
  const int F = 0, B = 1, W = 2, last = ps.num_virtual_stages() - 1;
  auto start = [&](int type, int mb, int j) { return t.at(K{type, mb, j}).first; };
  auto end = [&](int type, int mb, int j) { return t.at(K{type, mb, j}).second; };
  for (int mb = 0; mb < ps.spec.micro_batches; ++mb)
    for (int j = 0; j <= last; ++j) {
      ASSERT_TRUE(t.count(K{F, mb, j}) && t.count(K{B, mb, j}));
      if (j > 0) {
        EXPECT_GE(start(F, mb, j), end(F, mb, j - 1)) << "F mb " << mb << " vs " << j;
      }
      EXPECT_GE(start(B, mb, j), end(F, mb, j)) << "B after F, mb " << mb;
      if (j < last) {
        EXPECT_GE(start(B, mb, j), end(B, mb, j + 1)) << "B mb " << mb << " vs " << j;
      }
      if (t.count(K{W, mb, j})) {
        EXPECT_GE(start(W, mb, j), end(B, mb, j));
      }
    }
}

TEST(PipelineSchedule, EveryScheduleRespectsDependencies) {
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, 4, 7, 8, 16}) {
      for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZbH1}) {
        PipelineSchedule ps = make(k, p, m);
        SimResult r = simulate_pipeline(ps);
        expect_dependencies(ps, r);
      }
      if (p >= 2 && m % p == 0)
        for (int v : {2, 3}) {
          PipelineSchedule ps = make(ScheduleKind::Interleaved1F1B, p, m, v);
          expect_dependencies(ps, simulate_pipeline(ps));
        }
    }
}

// The bubble of GPipe and 1F1B with equal F and B on every stage is (p-1)/(m+p-1) of the
// step on every stage, for any F and B durations.
TEST(PipelineSchedule, IdleFractionOfGpipeAnd1F1BMatchesTheory) {
  for (StageCosts c : {StageCosts{}, StageCosts{1.0, 3.0, 1.5, 1.5, 0.0}})
    for (int p : {1, 2, 4, 8})
      for (int m : {1, 4, 8, 16})
        for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
          SimResult r = simulate_pipeline(make(k, p, m), c);
          double theory = static_cast<double>(p - 1) / (m + p - 1);
          for (const StageResult& s : r.stages)
            EXPECT_NEAR(s.idle_fraction, theory, 1e-12)
                << schedule_kind_name(k) << " p=" << p << " m=" << m;
        }
}

TEST(PipelineSchedule, OneFOneBHoldsAtMostPMicroBatches) {
  for (int p : {2, 4, 8})
    for (int m : {1, 4, 8, 16, 32}) {
      SimResult r = simulate_pipeline(make(ScheduleKind::OneFOneB, p, m));
      EXPECT_EQ(r.stages[0].peak_in_flight, std::min(p, m)) << "p=" << p << " m=" << m;
      for (int s = 0; s < p; ++s) EXPECT_LE(r.stages[static_cast<size_t>(s)].peak_in_flight, p - s);
      // GPipe stashes every micro-batch: the memory 1F1B saves.
      EXPECT_EQ(simulate_pipeline(make(ScheduleKind::GPipe, p, m)).stages[0].peak_in_flight, m);
    }
}

// Unit costs F = B = W = 1 (so 1F1B's whole backward B + W costs 2).
TEST(PipelineSchedule, ZbH1BubbleAtMostSixTenthsOf1F1B) {
  StageCosts c;  // F 1, B 2, B_input 1, W 1
  for (auto [p, m] : {std::pair{4, 8}, std::pair{2, 4}, std::pair{4, 16}, std::pair{8, 16}}) {
    double one = simulate_pipeline(make(ScheduleKind::OneFOneB, p, m), c).mean_idle_fraction();
    SimResult zb = simulate_pipeline(make(ScheduleKind::ZbH1, p, m), c);
    EXPECT_LE(zb.mean_idle_fraction(), 0.6 * one) << "p=" << p << " m=" << m;
    // zb-h1 keeps 1F1B's memory bound: at most p micro-batches' activations on any stage.
    for (const StageResult& s : zb.stages) EXPECT_LE(s.peak_stashed, p);
  }
  // p=4, m=8: the bubble is (p-1)(F+B-W) = 3 units of a 3m + 3 = 27-unit step.
  SimResult zb = simulate_pipeline(make(ScheduleKind::ZbH1, 4, 8), c);
  EXPECT_DOUBLE_EQ(zb.makespan, 27.0);
  EXPECT_NEAR(zb.mean_idle_fraction(), 3.0 / 27.0, 1e-12);
}

TEST(PipelineSchedule, InterleavedBubbleBelow1F1B) {
  for (auto [p, m] : {std::pair{2, 4}, std::pair{4, 8}, std::pair{4, 16}})
    for (int v : {2, 4}) {
      double one = simulate_pipeline(make(ScheduleKind::OneFOneB, p, m)).mean_idle_fraction();
      SimResult r = simulate_pipeline(make(ScheduleKind::Interleaved1F1B, p, m, v));
      EXPECT_LT(r.mean_idle_fraction(), one) << "p=" << p << " m=" << m << " v=" << v;
    }
}

TEST(PipelineSchedule, SendsAndReceivesImpliedByTheTable) {
  PipelineSchedule ps = make(ScheduleKind::OneFOneB, 3, 4);
  auto count = [&](int s, ActionType t) {
    int n = 0;
    for (const Action& a : ps.stages[static_cast<size_t>(s)]) n += a.type == t;
    return n;
  };
  EXPECT_EQ(count(0, ActionType::RecvActivation), 0);
  EXPECT_EQ(count(0, ActionType::SendActivation), 4);
  EXPECT_EQ(count(0, ActionType::RecvGrad), 4);
  EXPECT_EQ(count(0, ActionType::SendGrad), 0);
  EXPECT_EQ(count(2, ActionType::SendActivation), 0);
  EXPECT_EQ(count(2, ActionType::RecvGrad), 0);
  EXPECT_EQ(count(1, ActionType::RecvActivation), 4);
  // Stage 1's first actions: receive mb 0 from stage 0, forward it, send it to stage 2.
  EXPECT_EQ(ps.stages[1][0], (Action{ActionType::RecvActivation, 0, 0, 0}));
  EXPECT_EQ(ps.stages[1][1], (Action{ActionType::Forward, 0, 0, -1}));
  EXPECT_EQ(ps.stages[1][2], (Action{ActionType::SendActivation, 0, 0, 2}));
  // Interleaving wraps from the last stage's chunk 0 to the first stage's chunk 1.
  PipelineSchedule il = make(ScheduleKind::Interleaved1F1B, 2, 2, 2);
  EXPECT_EQ(il.stages[1][2], (Action{ActionType::SendActivation, 0, 0, 0}));
}

// The simulator is the test oracle, so it must reject broken tables.
TEST(PipelineSchedule, SimulatorRejectsBrokenTables) {
  PipelineSchedule ps = make(ScheduleKind::OneFOneB, 2, 2);
  PipelineSchedule swapped = ps;  // stage 1: B(0) before F(0)
  auto& row = swapped.stages[1];
  std::swap(row[1], row[2]);
  EXPECT_THROW(simulate_pipeline(swapped), Error);
  PipelineSchedule dropped = ps;  // a micro-batch's backward missing on stage 0
  auto& row0 = dropped.stages[0];
  row0.erase(std::find(row0.begin(), row0.end(), Action{ActionType::RecvGrad, 1, 0, 1}));
  row0.erase(std::find(row0.begin(), row0.end(), Action{ActionType::Backward, 1, 0, -1}));
  EXPECT_THROW(simulate_pipeline(dropped), Error);
  PipelineSchedule deadlock = ps;  // stage 0 waits for a gradient before sending mb 0
  auto& d0 = deadlock.stages[0];
  ASSERT_EQ(d0[4], (Action{ActionType::RecvGrad, 0, 0, 1}));
  std::rotate(d0.begin(), d0.begin() + 4, d0.begin() + 5);  // recv_grad(mb 0) moved first
  EXPECT_THROW(simulate_pipeline(deadlock), Error);
}

TEST(PipelineSchedule, ValidationNamesTheProblem) {
  auto err = [](ScheduleSpec s) {
    try {
      build_pipeline_schedule(s);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  ScheduleSpec s{ScheduleKind::Interleaved1F1B, 4, 6, 2, 0};
  EXPECT_NE(err(s).find("multiple of pp (4)"), std::string::npos) << err(s);
  s = {ScheduleKind::Interleaved1F1B, 4, 8, 2, 12};
  EXPECT_NE(err(s).find("divisible by pp * virtual_stages"), std::string::npos) << err(s);
  s = {ScheduleKind::Interleaved1F1B, 4, 8, 1, 0};
  EXPECT_NE(err(s).find("virtual_stages >= 2"), std::string::npos) << err(s);
  s = {ScheduleKind::OneFOneB, 4, 8, 2, 0};
  EXPECT_NE(err(s).find("one model chunk"), std::string::npos) << err(s);
  s = {ScheduleKind::OneFOneB, 8, 8, 1, 6};
  EXPECT_NE(err(s).find("6 layers cannot be split"), std::string::npos) << err(s);
  s = {ScheduleKind::GPipe, 2, 0, 1, 0};
  EXPECT_NE(err(s).find("expected >= 1"), std::string::npos) << err(s);
  s = {ScheduleKind::Interleaved1F1B, 4, 8, 2, 16};
  EXPECT_EQ(err(s), "(no error)");
}

// ---- Point-to-point order under NCCL's semantics ----
//
// NCCL's send and recv block the stream they run on until the peer's matching call runs, and a
// communicator's operations on one stream run in issue order. So a stage's transfers complete in
// the order it issues them, not as MPI matches them by tag. The executor's issue order on a
// stage (PipelineExecutor::step): the actions of its row in order, each receive posted one
// compute action early (look-ahead), a compute action waiting on the host for the receive it
// consumes. `Fifos` says which transfers share one in-order stream: one per stage for all its
// transfers (a single NCCL communicator), or one per directed pair of stages (braid's NCCL
// pipeline channels: activations and gradients between two stages on separate streams).
enum class Fifos { PerStage, PerDirectedPair };

// A transfer as both ends name it: (gradient?, micro-batch, the receiving virtual stage).
using Msg = std::tuple<bool, int, int>;

struct P2pOp {
  bool send = false;
  int self = 0, peer = 0;
  Msg msg;
};

// True when every stage's row runs to its end; false on a deadlock. Fails the test when two
// transfers meet at the heads of their streams but are not the same message.
// `connect_on_first_use`: NCCL sets up a channel's connection inside its first send or receive
// there, and the calling host waits until the peer's first call on the same channel (braid
// connects every pipeline channel when it creates them, so the executor never meets this).
bool completes_in_issue_order(const PipelineSchedule& ps, Fifos fifos,
                              bool connect_on_first_use = false) {
  const int p = ps.spec.stages, last = ps.num_virtual_stages() - 1;
  auto msg_of = [&](int s, const Action& a) -> Msg {
    const int vs = ps.virtual_stage(s, a.chunk);
    switch (a.type) {
      case ActionType::SendActivation:
        return {false, a.mb, vs + 1};
      case ActionType::RecvActivation:
        return {false, a.mb, vs};
      case ActionType::SendGrad:
        return {true, a.mb, vs - 1};
      default:
        return {true, a.mb, vs};  // RecvGrad
    }
  };
  auto is_recv = [](ActionType t) {
    return t == ActionType::RecvActivation || t == ActionType::RecvGrad;
  };
  auto is_send = [](ActionType t) {
    return t == ActionType::SendActivation || t == ActionType::SendGrad;
  };
  // A stream per stage, or per directed pair (src * p + dst) for each direction's ops.
  std::map<int, std::deque<P2pOp>> streams;
  auto stream_of = [&](const P2pOp& op) {
    if (fifos == Fifos::PerStage) return op.self;
    const int src = op.send ? op.self : op.peer, dst = op.send ? op.peer : op.self;
    return p + 2 * (src * p + dst) + (op.send ? 0 : 1);
  };
  // A channel side: its direction and whether it sends or receives.
  auto side_of = [&](const P2pOp& op) {
    const int src = op.send ? op.self : op.peer, dst = op.send ? op.peer : op.self;
    return 2 * (src * p + dst) + (op.send ? 0 : 1);
  };
  std::set<int> entered;  // channel sides whose first call has been made
  bool progress = true;
  std::vector<size_t> pc(static_cast<size_t>(p), 0);
  std::vector<std::map<Msg, bool>> posted(static_cast<size_t>(p)), done(static_cast<size_t>(p));
  // False when the host waits in the call (a first use whose peer has not made its own yet).
  auto post = [&](int s, const Action& a) {
    const Msg m = msg_of(s, a);
    if (posted[static_cast<size_t>(s)].count(m)) return true;
    const P2pOp op{is_send(a.type), s, a.peer, m};
    if (connect_on_first_use) {
      P2pOp other = op;
      other.send = !op.send;
      std::swap(other.self, other.peer);
      if (entered.insert(side_of(op)).second) progress = true;
      if (!entered.count(side_of(other))) return false;
    }
    posted[static_cast<size_t>(s)][m] = true;
    streams[stream_of(op)].push_back(op);
    return true;
  };
  while (progress) {
    progress = false;
    // Hosts: issue until a compute action waits for a receive that has not completed, or a call
    // waits for its peer.
    for (int s = 0; s < p; ++s) {
      const auto& row = ps.stages[static_cast<size_t>(s)];
      size_t& i = pc[static_cast<size_t>(s)];
      while (i < row.size()) {
        const Action& a = row[i];
        if (is_compute(a.type)) {
          bool waiting = false;
          for (size_t j = i + 1; j < row.size() && !is_compute(row[j].type); ++j)
            if (is_recv(row[j].type)) {
              waiting = !post(s, row[j]);
              break;
            }
          if (waiting) break;
          const int vs = ps.virtual_stage(s, a.chunk);
          bool ready = true;
          if (a.type == ActionType::Forward && vs > 0)
            ready = done[static_cast<size_t>(s)].count(Msg{false, a.mb, vs}) > 0;
          if (a.type == ActionType::Backward && vs < last)
            ready = done[static_cast<size_t>(s)].count(Msg{true, a.mb, vs}) > 0;
          if (!ready) break;
        } else if (!post(s, a)) {
          break;
        }
        ++i;
        progress = true;
      }
    }
    // Streams: a send and a receive of one pair of stages complete together when each is at
    // the head of its stream.
    for (auto& [id, q] : streams) {
      if (q.empty() || !q.front().send) continue;
      const P2pOp snd = q.front();
      P2pOp want = snd;
      want.send = false;
      std::swap(want.self, want.peer);
      auto& rq = streams[stream_of(want)];
      if (rq.empty()) continue;
      const P2pOp& rcv = rq.front();
      if (rcv.send || rcv.peer != snd.self) continue;  // the peer's stream waits on another op
      EXPECT_EQ(rcv.msg, snd.msg) << "stage " << snd.self << " sends one message to stage "
                                  << snd.peer << " while it receives another first";
      done[static_cast<size_t>(snd.peer)][rcv.msg] = true;
      rq.pop_front();
      streams[id].pop_front();
      progress = true;
    }
  }
  for (int s = 0; s < p; ++s)
    if (pc[static_cast<size_t>(s)] < ps.stages[static_cast<size_t>(s)].size()) return false;
  for (const auto& [id, q] : streams)
    if (!q.empty()) return false;
  return true;
}

// With one in-order stream per directed pair of stages every schedule runs to its end; with one
// stream per stage (every transfer of a stage in one NCCL communicator) 1F1B deadlocks at once:
// stage 0 issues send(A0), send(A1), recv(G0) while stage 1 issues recv(A0), send(G0), recv(A1).
TEST(PipelineSchedule, NcclChannelsPerDirectedPairNeverDeadlock) {
  for (int p : {2, 3, 4, 8})
    for (int m : {1, 2, 3, 4, 8, 16}) {
      for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZbH1})
        EXPECT_TRUE(completes_in_issue_order(make(k, p, m), Fifos::PerDirectedPair))
            << schedule_kind_name(k) << " p " << p << " m " << m;
      if (m % p == 0) {
        for (int v : {2, 3})
          EXPECT_TRUE(completes_in_issue_order(make(ScheduleKind::Interleaved1F1B, p, m, v),
                                               Fifos::PerDirectedPair))
              << "interleaved p " << p << " m " << m << " v " << v;
      }
    }
  EXPECT_FALSE(completes_in_issue_order(make(ScheduleKind::OneFOneB, 2, 2), Fifos::PerStage));
  EXPECT_FALSE(completes_in_issue_order(make(ScheduleKind::GPipe, 2, 1), Fifos::PerStage));
}

// Channels left to connect on their first use deadlock the defaults (1f1b, two stages, one
// micro-batch): stage 0 waits in its first receive of a gradient, posted ahead of its forward,
// and stage 1 in its first receive of an activation, which stage 0 sends after that forward.
// That is why the NCCL communicator connects every channel when it creates them
// (parallel/nccl_communicator.cpp, connect_channels), which the test above assumes.
TEST(PipelineSchedule, NcclChannelsConnectedOnFirstUseDeadlock) {
  EXPECT_FALSE(completes_in_issue_order(make(ScheduleKind::OneFOneB, 2, 1), Fifos::PerDirectedPair,
                                        /*connect_on_first_use=*/true));
  EXPECT_FALSE(completes_in_issue_order(make(ScheduleKind::GPipe, 4, 8), Fifos::PerDirectedPair,
                                        /*connect_on_first_use=*/true));
  // A schedule whose first calls on every channel meet: still completes.
  EXPECT_TRUE(completes_in_issue_order(make(ScheduleKind::OneFOneB, 2, 4), Fifos::PerDirectedPair,
                                       /*connect_on_first_use=*/true));
}

}  // namespace
}  // namespace braid
