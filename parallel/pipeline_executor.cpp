// PipelineExecutor: one stage's schedule row on Transformer chunks, p2p over the pp group.
#include "parallel/pipeline_executor.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/stream_timeline.h"
#include "parallel/scalar_reduce.h"
#include "parallel/tensor_parallel.h"

namespace braid {

BlockRange pipeline_block_range(int n_layer, int num_virtual, int vs,
                                const std::vector<int>& split) {
  BRAID_CHECK(vs >= 0 && vs < num_virtual, "virtual stage {} of {}", vs, num_virtual);
  if (!split.empty()) {
    BRAID_USER_CHECK(static_cast<int>(split.size()) == num_virtual,
                     "parallel.pp_split has {} entries; expected one per pipeline (virtual) stage, "
                     "{}",
                     split.size(), num_virtual);
    int total = 0, first = 0;
    for (int i = 0; i < num_virtual; ++i) {
      BRAID_USER_CHECK(split[i] >= 1, "parallel.pp_split[{}] is {}; every stage needs >= 1 block",
                       i, split[i]);
      if (i < vs) first += split[i];
      total += split[i];
    }
    BRAID_USER_CHECK(total == n_layer, "parallel.pp_split sums to {} blocks; the model has {}",
                     total, n_layer);
    return {first, first + split[vs]};
  }
  BRAID_USER_CHECK(n_layer >= num_virtual,
                   "{} layers cannot be split into {} pipeline stages; lower parallel.pp or "
                   "parallel.virtual_stages",
                   n_layer, num_virtual);
  const int base = n_layer / num_virtual, extra = n_layer % num_virtual;
  const int first = vs * base + std::min(vs, extra);
  return {first, first + base + (vs < extra ? 1 : 0)};
}

PipelineExecutor::PipelineExecutor(ExecContext& ctx, PipelineSchedule schedule, int stage,
                                   std::vector<Transformer*> chunks, Communicator* pp,
                                   Communicator* embedding, PipelineExecutorOptions options)
    : ctx_(ctx),
      schedule_(std::move(schedule)),
      stage_(stage),
      chunks_(std::move(chunks)),
      pp_(pp),
      embedding_(embedding),
      options_(std::move(options)) {
  const int p = schedule_.spec.stages, v = schedule_.spec.virtual_stages;
  BRAID_CHECK(stage_ >= 0 && stage_ < p, "stage {} of a {}-stage schedule", stage_, p);
  BRAID_CHECK(static_cast<int>(chunks_.size()) == v,
              "stage {} has {} model chunks; the schedule "
              "has {} per stage",
              stage_, chunks_.size(), v);
  BRAID_CHECK(p == 1 || (pp_ && pp_->size() == p && pp_->rank() == stage_),
              "the pipeline communicator must have {} members with this stage ({}) as its rank", p,
              stage_);
  for (int c = 0; c < v; ++c) {
    const Transformer* t = chunks_[c];
    BRAID_CHECK(t, "stage {} chunk {} is null", stage_, c);
    BRAID_CHECK(t->has_embedding() == is_first(c) && t->has_head() == is_last(c),
                "stage {} chunk {} (virtual stage {}, blocks [{}, {})) does not match the "
                "schedule's embedding/head placement",
                stage_, c, vstage(c), t->first_block(), t->last_block());
  }
  timeline_ = options_.device_timeline;
  if (!timeline_ && !ctx_.device().is_cpu())
    timeline_ = std::make_shared<StreamTimeline>(ctx_.stream().handle);
  if (options_.trace_pid < 0)
    options_.trace_pid = pp_ ? pp_->world_ranks()[static_cast<size_t>(pp_->rank())] : 0;
}

double PipelineExecutor::now_us() const {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

void PipelineExecutor::record(const Action* a, const char* category, double t0, double t1,
                              int tid) {
  if (!options_.trace) return;
  TraceEvent e;
  if (a) {
    e.name = fmt::format("{}{}", action_type_name(a->type), a->mb);
    if (schedule_.spec.virtual_stages > 1) e.name += fmt::format(".{}", a->chunk);
  } else {
    e.name = category;
  }
  e.category = category;
  e.ts_us = t0 - origin_us_;
  e.dur_us = t1 - t0;
  e.pid = options_.trace_pid;
  e.tid = tid;
  events_.push_back(std::move(e));
}

// Tags name (micro-batch, receiving virtual stage, activation or gradient), which both ends
// know: the sender's chunk index can differ from the receiver's when interleaving wraps.
int PipelineExecutor::tag(int mb, int receiving_vs, bool grad) const {
  return (mb * schedule_.num_virtual_stages() + receiving_vs) * 2 + (grad ? 1 : 0);
}

void PipelineExecutor::post_recv(const Action& a) {
  const bool grad = a.type == ActionType::RecvGrad;
  const auto key = std::make_pair(Key{a.mb, a.chunk}, grad);
  if (recvs_.count(key)) return;
  const double t0 = now_us();
  const Transformer& t = *chunks_[a.chunk];
  PendingRecv pr;
  pr.buf = ctx_.empty({current_batch_, current_seq_ / options_.seq_shards, t.config().n_embd},
                      options_.activation_dtype);
  pr.work = pp_->recv(pr.buf, a.peer, tag(a.mb, vstage(a.chunk), grad));
  recvs_.emplace(key, std::move(pr));
  record(&a, "recv", t0, now_us(), 1);
}

Tensor PipelineExecutor::take_recv(const Action& a) {
  const bool grad = a.type == ActionType::RecvGrad;
  auto it = recvs_.find(std::make_pair(Key{a.mb, a.chunk}, grad));
  BRAID_CHECK(it != recvs_.end(), "stage {}: {} was never posted", stage_, action_str(a));
  const double t0 = now_us();
  it->second.work.wait();
  record(&a, "wait", t0, now_us(), 1);
  Tensor t = std::move(it->second.buf);
  recvs_.erase(it);
  return t;
}

void PipelineExecutor::run_action(const Action& a, const PipelineStepInput& in,
                                  PipelineStepResult& r) {
  const Key key{a.mb, a.chunk};
  Transformer& model = *chunks_[a.chunk];
  switch (a.type) {
    case ActionType::RecvActivation:
    case ActionType::RecvGrad:
      grads_[key] = take_recv(a);  // kept until the compute action that follows
      return;
    case ActionType::SendActivation:
    case ActionType::SendGrad: {
      const bool grad = a.type == ActionType::SendGrad;
      auto it = grads_.find(key);
      BRAID_CHECK(it != grads_.end(), "stage {}: nothing to send for {}", stage_, action_str(a));
      const double t0 = now_us();
      const int to_vs = vstage(a.chunk) + (grad ? -1 : 1);
      sends_.push_back(pp_->send(it->second, a.peer, tag(a.mb, to_vs, grad)));
      grads_.erase(it);  // the Work keeps the storage alive until sent
      record(&a, "send", t0, now_us(), 1);
      return;
    }
    case ActionType::Forward: {
      const double t0 = now_us();
      begin_compute();
      auto& mb = mbs_[key];
      mb = std::make_unique<MicroBatch>(ctx_, schedule_.spec.kind == ScheduleKind::ZbH1);
      mb->on_grad_ready = options_.on_grad_ready;
      if (options_.prepare_micro_batch) options_.prepare_micro_batch(*mb, a.mb);
      if (a.mb < static_cast<int>(in.sample_starts.size()))
        mb->sample_starts = in.sample_starts[static_cast<size_t>(a.mb)];
      Tensor x;
      if (is_first(a.chunk)) {
        BRAID_CHECK(a.mb < static_cast<int>(in.tokens.size()),
                    "stage {} holds the embedding but got {} token tensors for {} micro-batches",
                    stage_, in.tokens.size(), schedule_.spec.micro_batches);
        x = in.tokens[static_cast<size_t>(a.mb)];
      } else {
        auto it = grads_.find(key);
        BRAID_CHECK(it != grads_.end(), "stage {}: {} before its receive", stage_, action_str(a));
        x = std::move(it->second);
        grads_.erase(it);
      }
      Tensor y = model.forward(x, *mb);
      if (is_last(a.chunk))
        outputs_[key] = y;
      else
        grads_[key] = y;  // for the send that follows
      end_compute(a, "forward", t0, r);
      return;
    }
    case ActionType::Backward: {
      const double t0 = now_us();
      begin_compute();
      auto mit = mbs_.find(key);
      BRAID_CHECK(mit != mbs_.end(), "stage {}: {} before its forward", stage_, action_str(a));
      MicroBatch& mb = *mit->second;
      Tensor dy;
      if (is_last(a.chunk)) {
        BRAID_CHECK(a.mb < static_cast<int>(in.targets.size()),
                    "stage {} holds the loss but got {} target tensors for {} micro-batches",
                    stage_, in.targets.size(), schedule_.spec.micro_batches);
        auto oit = outputs_.find(key);
        const LossSum l =
            model.loss(oit->second, in.targets[static_cast<size_t>(a.mb)], in.grad_scale, mb);
        outputs_.erase(oit);
        r.loss.sum += l.sum;
        r.loss.count += l.count;
      } else {
        auto it = grads_.find(key);
        BRAID_CHECK(it != grads_.end(), "stage {}: {} before its receive", stage_, action_str(a));
        dy = std::move(it->second);
        grads_.erase(it);
      }
      Tensor dx = model.backward(dy, mb);
      BRAID_CHECK(mb.stash_size() == 0, "stage {}: {} saved tensors left after {}", stage_,
                  mb.stash_size(), action_str(a));
      if (!is_first(a.chunk)) grads_[key] = dx;
      if (mb.deferred() == 0) mbs_.erase(mit);  // zb-h1 keeps it for W
      end_compute(a, "backward", t0, r);
      return;
    }
    case ActionType::Weight: {
      const double t0 = now_us();
      begin_compute();
      auto mit = mbs_.find(key);
      BRAID_CHECK(mit != mbs_.end(), "stage {}: {} without its backward", stage_, action_str(a));
      mit->second->run_deferred();
      mbs_.erase(mit);
      end_compute(a, "weight", t0, r);
      return;
    }
  }
}

void PipelineExecutor::begin_compute() {
  if (timeline_) timeline_->mark();
}

void PipelineExecutor::end_compute(const Action& a, const char* category, double t0,
                                   PipelineStepResult& r) {
  const double t1 = now_us();
  if (!timeline_) {
    r.busy_s += (t1 - t0) * 1e-6;
    record(&a, category, t0, t1, 0);
    return;
  }
  const size_t end_mark = timeline_->pending() - first_mark_;  // counted from the step's first
  timeline_->mark();
  long event = -1;
  if (options_.trace) {
    record(&a, category, t0, t1, 0);  // host times until settle_device_times()
    event = static_cast<long>(events_.size()) - 1;
  }
  spans_.push_back({end_mark - 1, end_mark, event});
}

// The step's compute actions in device time: drain() waits for the last mark and gives the
// gaps between consecutive marks, the first of them from a mark left by the step before (or
// the step's own first mark). Mark i of this step is at the sum of the gaps before it.
void PipelineExecutor::settle_device_times(PipelineStepResult& r) {
  if (!timeline_) return;
  const size_t marks = timeline_->pending();  // first_mark_ of them before this step's first
  const std::vector<double> gaps = timeline_->drain();
  BRAID_CHECK(gaps.size() + 1 == marks,
              "stage {}: the device timeline gave {} intervals for {} marks", stage_, gaps.size(),
              marks);
  std::vector<double> at(marks - first_mark_, 0.0);  // seconds from this step's first mark
  for (size_t i = 1; i < at.size(); ++i) at[i] = at[i - 1] + gaps[first_mark_ + i - 1];
  for (const DeviceSpan& sp : spans_) {
    const double dur = at[sp.end_mark] - at[sp.begin_mark];
    r.busy_s += dur;
    if (sp.event >= 0) {
      TraceEvent& e = events_[static_cast<size_t>(sp.event)];
      e.ts_us = step_start_us_ + at[sp.begin_mark] * 1e6 - origin_us_;
      e.dur_us = dur * 1e6;
    }
  }
  spans_.clear();
}

void PipelineExecutor::sum_tied_embedding() {
  if (schedule_.spec.stages == 1 || !embedding_ || embedding_->size() < 2) return;
  for (Transformer* t : chunks_) {
    Parameter* tied = t->tied_embedding();
    if (!tied || !tied->trainable) continue;
    const double t0 = now_us();
    // a + b == b + a in IEEE arithmetic: both stages end with bitwise the same sum.
    embedding_->all_reduce(tied->grad(), ReduceOp::Sum).wait();
    record(nullptr, "tied_allreduce", t0, now_us(), 1);
  }
}

PipelineStepResult PipelineExecutor::step(const PipelineStepInput& in) {
  BRAID_CHECK(in.batch > 0 && in.seq > 0, "pipeline step without a micro-batch shape");
  current_batch_ = in.batch;
  current_seq_ = in.seq;
  PipelineStepResult r;
  // A common start, so that each stage's wall time and bubble are measured from the same moment.
  if (pp_ && pp_->size() > 1) pp_->barrier().wait();
  step_start_us_ = now_us();
  if (origin_us_ < 0) origin_us_ = step_start_us_;
  spans_.clear();
  if (timeline_) {
    first_mark_ = timeline_->pending();  // marks an earlier step left (drain keeps its last)
    timeline_->mark();                   // the step's first: device times are counted from here
  }
  const std::vector<Action>& row = schedule_.stages[static_cast<size_t>(stage_)];
  for (size_t i = 0; i < row.size(); ++i) {
    // Post the next receive one compute action ahead, so its data arrives while this one runs.
    if (is_compute(row[i].type)) {
      for (size_t j = i + 1; j < row.size(); ++j) {
        if (row[j].type == ActionType::RecvActivation || row[j].type == ActionType::RecvGrad) {
          post_recv(row[j]);
          break;
        }
        if (is_compute(row[j].type)) break;
      }
    }
    if ((row[i].type == ActionType::RecvActivation || row[i].type == ActionType::RecvGrad))
      post_recv(row[i]);
    run_action(row[i], in, r);
  }
  if (!sends_.empty()) {
    const double tw = now_us();
    for (Work& w : sends_) w.wait();
    sends_.clear();
    record(nullptr, "wait", tw, now_us(), 1);
  }
  BRAID_CHECK(mbs_.empty() && outputs_.empty() && grads_.empty() && recvs_.empty(),
              "stage {}: micro-batch state left after the step ({} micro-batches, {} outputs, {} "
              "tensors, {} receives)",
              stage_, mbs_.size(), outputs_.size(), grads_.size(), recvs_.size());
  sum_tied_embedding();
  settle_device_times(r);  // waits for the stage's last compute action on the device
  r.wall_s = (now_us() - step_start_us_) * 1e-6;
  r.makespan_s = r.wall_s;
  if (pp_ && pp_->size() > 1) {
    Tensor w = Tensor::from_vector({static_cast<float>(r.wall_s)}, {1});
    pp_->all_reduce(w, ReduceOp::Max).wait();
    r.makespan_s = std::max<double>(w.f32()[0], r.wall_s);
  }
  return r;
}

LossSum PipelineExecutor::evaluate(const Tensor& tokens, const Tensor& targets, int64_t batch,
                                   int64_t seq, const Tensor& sample_starts) {
  const int p = schedule_.spec.stages, nv = schedule_.num_virtual_stages();
  LossSum out;
  for (int vs = 0; vs < nv; ++vs) {
    if (vs % p != stage_) continue;
    Transformer& t = *chunks_[static_cast<size_t>(vs / p)];
    // Tags of micro-batch m (one past the step's last), so nothing crosses a step's messages.
    const int recv_tag = tag(schedule_.spec.micro_batches, vs, false);
    Tensor x;
    if (vs == 0) {
      x = tokens;
    } else {
      x = ctx_.empty({batch, seq / options_.seq_shards, t.config().n_embd},
                     options_.activation_dtype);
      pp_->recv(x, (vs - 1) % p, recv_tag).wait();
    }
    Tensor y = t.forward_eval(ctx_, x, sample_starts);
    if (vs == nv - 1)
      out = t.loss_eval(ctx_, y, targets);
    else
      pp_->send(y, (vs + 1) % p, tag(schedule_.spec.micro_batches, vs + 1, false)).wait();
  }
  return out;
}

std::vector<TraceEvent> gather_trace(Communicator& comm, const std::vector<TraceEvent>& local) {
  nlohmann::json j = nlohmann::json::array();
  for (const TraceEvent& e : local)
    j.push_back({e.name, e.category, e.ts_us, e.dur_us, e.pid, e.tid});
  const std::vector<std::string> all = gather_strings(comm, j.dump());
  std::vector<TraceEvent> out;
  if (comm.rank() != 0) return out;
  out = local;
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    for (const auto& e : nlohmann::json::parse(all[r]))
      out.push_back({e[0].get<std::string>(), e[1].get<std::string>(), e[2].get<double>(),
                     e[3].get<double>(), e[4].get<int>(), e[5].get<int>()});
  }
  return out;
}

double pipeline_grad_norm(ExecContext& ctx, const std::vector<Parameter*>& params,
                          Communicator* pp) {
  return model_parallel_grad_norm(ctx, params, nullptr, pp);
}

}  // namespace braid
