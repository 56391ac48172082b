// Schedule tables for gpipe, 1f1b, interleaved-1f1b and zb-h1.
#include "parallel/pipeline_schedule.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace braid {

bool parse_schedule_kind(std::string_view s, ScheduleKind* out) {
  if (s == "gpipe")
    *out = ScheduleKind::GPipe;
  else if (s == "1f1b")
    *out = ScheduleKind::OneFOneB;
  else if (s == "interleaved-1f1b")
    *out = ScheduleKind::Interleaved1F1B;
  else if (s == "zb-h1")
    *out = ScheduleKind::ZbH1;
  else
    return false;
  return true;
}

const char* schedule_kind_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::GPipe:
      return "gpipe";
    case ScheduleKind::OneFOneB:
      return "1f1b";
    case ScheduleKind::Interleaved1F1B:
      return "interleaved-1f1b";
    case ScheduleKind::ZbH1:
      return "zb-h1";
  }
  return "?";
}

const char* action_type_name(ActionType t) {
  switch (t) {
    case ActionType::Forward:
      return "F";
    case ActionType::Backward:
      return "B";
    case ActionType::Weight:
      return "W";
    case ActionType::SendActivation:
      return "send_act";
    case ActionType::RecvActivation:
      return "recv_act";
    case ActionType::SendGrad:
      return "send_grad";
    case ActionType::RecvGrad:
      return "recv_grad";
  }
  return "?";
}

bool is_compute(ActionType t) {
  return t == ActionType::Forward || t == ActionType::Backward || t == ActionType::Weight;
}

std::string action_str(const Action& a) {
  std::string s = fmt::format("{}(mb {}, chunk {})", action_type_name(a.type), a.mb, a.chunk);
  if (a.type == ActionType::SendActivation || a.type == ActionType::SendGrad)
    s += fmt::format(" -> stage {}", a.peer);
  if (a.type == ActionType::RecvActivation || a.type == ActionType::RecvGrad)
    s += fmt::format(" <- stage {}", a.peer);
  return s;
}

namespace {

void validate(const ScheduleSpec& sp) {
  const char* name = schedule_kind_name(sp.kind);
  BRAID_USER_CHECK(sp.stages >= 1, "pipeline stages (parallel.pp) is {}; expected >= 1", sp.stages);
  BRAID_USER_CHECK(sp.micro_batches >= 1,
                   "micro-batches per step (data.grad_accum) is {}; expected >= 1",
                   sp.micro_batches);
  BRAID_USER_CHECK(sp.virtual_stages >= 1, "parallel.virtual_stages is {}; expected >= 1",
                   sp.virtual_stages);
  if (sp.kind == ScheduleKind::Interleaved1F1B) {
    BRAID_USER_CHECK(sp.stages >= 2, "schedule interleaved-1f1b needs pp >= 2 stages, got {}",
                     sp.stages);
    BRAID_USER_CHECK(sp.virtual_stages >= 2,
                     "schedule interleaved-1f1b needs parallel.virtual_stages >= 2, got {} "
                     "(with one chunk per stage use 1f1b)",
                     sp.virtual_stages);
    BRAID_USER_CHECK(sp.micro_batches % sp.stages == 0,
                     "schedule interleaved-1f1b needs the micro-batches per step ({}) to be a "
                     "multiple of pp ({}), as in Megatron; use {} or {}",
                     sp.micro_batches, sp.stages, sp.micro_batches / sp.stages * sp.stages,
                     (sp.micro_batches / sp.stages + 1) * sp.stages);
  } else {
    BRAID_USER_CHECK(sp.virtual_stages == 1,
                     "parallel.virtual_stages is {} but schedule {} has one model chunk per "
                     "stage; use interleaved-1f1b or virtual_stages 1",
                     sp.virtual_stages, name);
  }
  if (sp.layers > 0) {
    int parts = sp.stages * sp.virtual_stages;
    BRAID_USER_CHECK(sp.layers >= parts,
                     "{} layers cannot be split into pp * virtual_stages = {} * {} = {} parts; "
                     "lower pp or virtual_stages",
                     sp.layers, sp.stages, sp.virtual_stages, parts);
    BRAID_USER_CHECK(sp.kind != ScheduleKind::Interleaved1F1B || sp.layers % parts == 0,
                     "schedule interleaved-1f1b needs the {} layers to be divisible by pp * "
                     "virtual_stages = {} * {} = {}",
                     sp.layers, sp.stages, sp.virtual_stages, parts);
  }
}

// Appends compute actions with the receive before and the send after that they imply.
class RowBuilder {
 public:
  RowBuilder(const PipelineSchedule& ps, int stage, std::vector<Action>* row)
      : ps_(ps), s_(stage), row_(row) {}

  void forward(int mb, int chunk) {
    int vs = ps_.virtual_stage(s_, chunk);
    int p = ps_.spec.stages;
    if (vs > 0) row_->push_back({ActionType::RecvActivation, mb, chunk, (vs - 1) % p});
    row_->push_back({ActionType::Forward, mb, chunk, -1});
    if (vs < ps_.num_virtual_stages() - 1)
      row_->push_back({ActionType::SendActivation, mb, chunk, (vs + 1) % p});
  }
  void backward(int mb, int chunk) {
    int vs = ps_.virtual_stage(s_, chunk);
    int p = ps_.spec.stages;
    if (vs < ps_.num_virtual_stages() - 1)
      row_->push_back({ActionType::RecvGrad, mb, chunk, (vs + 1) % p});
    row_->push_back({ActionType::Backward, mb, chunk, -1});
    if (vs > 0) row_->push_back({ActionType::SendGrad, mb, chunk, (vs - 1) % p});
  }
  void weight(int mb, int chunk) { row_->push_back({ActionType::Weight, mb, chunk, -1}); }

 private:
  const PipelineSchedule& ps_;
  int s_;
  std::vector<Action>* row_;
};

void gpipe_row(RowBuilder& b, int m) {
  for (int i = 0; i < m; ++i) b.forward(i, 0);
  for (int i = 0; i < m; ++i) b.backward(i, 0);
}

// w_lag < 0: plain 1f1b. Otherwise zb-h1 with each W issued w_lag backwards after its B.
void one_f_one_b_row(RowBuilder& b, int p, int m, int s, int w_lag) {
  int warmup = std::min(p - 1 - s, m);
  int next_b = 0, next_w = 0;
  auto emit_b = [&] {
    b.backward(next_b++, 0);
    if (w_lag >= 0 && next_b - next_w > w_lag) b.weight(next_w++, 0);
  };
  for (int i = 0; i < warmup; ++i) b.forward(i, 0);
  for (int i = warmup; i < m; ++i) {
    b.forward(i, 0);
    emit_b();
  }
  while (next_b < m) emit_b();
  while (w_lag >= 0 && next_w < m) b.weight(next_w++, 0);
}

// Megatron's interleaved order over k = 0..m*v-1 virtual micro-batches: groups of p
// micro-batches go through chunk 0, then chunk 1, ...; backward visits chunks in reverse.
void interleaved_row(RowBuilder& b, int p, int m, int v, int s) {
  int total = m * v;
  auto mb_of = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto fchunk = [&](int k) { return (k % (p * v)) / p; };
  auto bchunk = [&](int k) { return v - 1 - (k % (p * v)) / p; };
  // With m == p there is no steady state; Megatron runs every forward first.
  int warmup = m == p ? total : std::min((p - s - 1) * 2 + (v - 1) * p, total);
  for (int k = 0; k < warmup; ++k) b.forward(mb_of(k), fchunk(k));
  int kb = 0;
  for (int k = warmup; k < total; ++k) {
    b.forward(mb_of(k), fchunk(k));
    b.backward(mb_of(kb), bchunk(kb));
    ++kb;
  }
  for (; kb < total; ++kb) b.backward(mb_of(kb), bchunk(kb));
}

}  // namespace

PipelineSchedule build_pipeline_schedule(const ScheduleSpec& spec) {
  validate(spec);
  PipelineSchedule ps;
  ps.spec = spec;
  int p = spec.stages, m = spec.micro_batches;
  ps.stages.resize(static_cast<size_t>(p));
  for (int s = 0; s < p; ++s) {
    RowBuilder b(ps, s, &ps.stages[static_cast<size_t>(s)]);
    switch (spec.kind) {
      case ScheduleKind::GPipe:
        gpipe_row(b, m);
        break;
      case ScheduleKind::OneFOneB:
        one_f_one_b_row(b, p, m, s, -1);
        break;
      case ScheduleKind::ZbH1:
        one_f_one_b_row(b, p, m, s, s);
        break;
      case ScheduleKind::Interleaved1F1B:
        interleaved_row(b, p, m, spec.virtual_stages, s);
        break;
    }
  }
  return ps;
}

}  // namespace braid
