// Pipeline schedules as data: each stage's ordered actions for (p stages, m micro-batches).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace braid {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved1F1B, ZbH1 };
// "gpipe", "1f1b", "interleaved-1f1b", "zb-h1"; false when unknown.
bool parse_schedule_kind(std::string_view s, ScheduleKind* out);
const char* schedule_kind_name(ScheduleKind k);

enum class ActionType {
  Forward,   // F: forward of (mb, chunk), stashing what backward needs
  Backward,  // B: backward; the whole backward, except in zb-h1 where it is the input gradient
  Weight,    // W: zb-h1 only, the deferred weight-gradient work of (mb, chunk)
  SendActivation,  // forward output of (mb, chunk) to `peer`
  RecvActivation,  // forward input of (mb, chunk) from `peer`
  SendGrad,        // input gradient of (mb, chunk) to `peer`
  RecvGrad,        // output gradient of (mb, chunk) from `peer`
};
const char* action_type_name(ActionType t);  // "F", "B", "W", "send_act", ...
bool is_compute(ActionType t);               // F, B or W

struct Action {
  ActionType type = ActionType::Forward;
  int mb = 0;     // micro-batch, 0..m-1
  int chunk = 0;  // model chunk on this stage, 0..v-1 (interleaving); 0 otherwise
  int peer = -1;  // the other stage of a send/recv; -1 for compute
  bool operator==(const Action&) const = default;
};
std::string action_str(const Action& a);  // "F(mb 3, chunk 1)", "send_act(mb 3, chunk 1) -> 2"

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int stages = 1;          // p
  int micro_batches = 1;   // m
  int virtual_stages = 1;  // v: model chunks per stage (interleaved-1f1b only)
  int layers = 0;          // transformer blocks to split; 0 skips the layer checks
};

struct PipelineSchedule {
  ScheduleSpec spec;
  std::vector<std::vector<Action>> stages;  // stages[s]: stage s's actions in execution order

  // Chunk c of stage s holds virtual stage c * p + s: a micro-batch's forward visits stage
  // 0..p-1 with chunk 0, then stage 0..p-1 with chunk 1, ... (Megatron's interleaving).
  int virtual_stage(int stage, int chunk) const { return chunk * spec.stages + stage; }
  int num_virtual_stages() const { return spec.stages * spec.virtual_stages; }
};

// Builds the table. Throws braid::UserError naming the schedule and the bad numbers when the
// spec is invalid: m, p, v < 1; v > 1 outside interleaved-1f1b; interleaved-1f1b with p < 2,
// v < 2 or m not a multiple of p; layers (when given) fewer than p * v or, for interleaving,
// not divisible by p * v.
//
// gpipe: all forwards, then all backwards. 1f1b: p - s - 1 warm-up forwards on stage s, then
// one forward / one backward alternating, then the remaining backwards (at most p - s
// micro-batches stashed). interleaved-1f1b: the same over m * v (micro-batch, chunk) pairs
// in Megatron's order. zb-h1: 1f1b with B split into B (input gradient, on the critical path)
// and W (weight gradient), stage s running each W s backwards late so W fills the cool-down
// bubble; a stage holds at most p micro-batches' activations, like the first stage of 1f1b.
// Every compute action on a non-first/last virtual stage is preceded by its receive and
// followed by its send.
PipelineSchedule build_pipeline_schedule(const ScheduleSpec& spec);

}  // namespace braid
