// GradBuckets: grouping, gradient binding, and the overlapped bucket collectives.
#include "parallel/grad_buckets.h"

#include <set>

#include "core/error.h"
#include "core/kernels/elementwise.h"

namespace braid {

GradBuckets::GradBuckets(ExecContext& ctx, const std::vector<Parameter*>& params,
                         Communicator& comm, const GradBucketOptions& options,
                         const std::vector<Parameter*>& late)
    : ctx_(ctx),
      comm_(comm),
      options_(options),
      convert_(options.comm_dtype != DType::F32 && comm.size() > 1) {
  BRAID_CHECK(options.bucket_bytes > 0 && options.first_bucket_bytes > 0,
              "bucket sizes {} / {} bytes", options.bucket_bytes, options.first_bucket_bytes);
  BRAID_CHECK(options.comm_dtype != DType::I32, "gradients cannot be reduced in i32");
  // Grouping: reverse order of use, the late parameters after all the others (from a bucket of
  // their own on); a bucket closes before a parameter that would overflow it.
  BRAID_CHECK(options.align >= 1, "bucket alignment {} elements", options.align);
  const int64_t align = options.reduce_scatter ? options.align : 1;
  auto round_up = [](int64_t n, int64_t m) { return (n + m - 1) / m * m; };
  const std::set<const Parameter*> is_late(late.begin(), late.end());
  std::vector<Bucket> groups(1);
  int64_t bytes = 0;
  for (const bool late_pass : {false, true}) {
    if (late_pass && !groups.back().slots.empty()) {
      groups.emplace_back();
      bytes = 0;
    }
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      Parameter* p = *it;
      if (!p->trainable) continue;  // frozen: no gradient, nothing to reduce
      if (is_late.count(p) != static_cast<size_t>(late_pass)) continue;
      BRAID_CHECK(!member_.count(p), "{} is listed twice", p->name);
      const int64_t n = p->value.numel();
      const int64_t cap = groups.size() == 1 ? options.first_bucket_bytes : options.bucket_bytes;
      if (!groups.back().slots.empty() && bytes + 4 * n > cap) {
        groups.emplace_back();
        bytes = 0;
      }
      Bucket& g = groups.back();
      if (n >= options.align_min_numel) g.numel = round_up(g.numel, align);
      g.slots.push_back({p, g.numel, n});
      g.numel += n;
      bytes += 4 * n;
      member_[p] = Member{groups.size() - 1};
    }
  }
  if (groups.back().slots.empty()) groups.pop_back();
  buckets_ = std::move(groups);
  for (const Parameter* p : late) add_late_contribution(*p);

  const int64_t parts = options.reduce_scatter ? comm.size() : 1;
  for (Bucket& b : buckets_) {
    b.numel = round_up(b.numel, parts * align);  // padding stays zero forever
    b.flat = ctx.zeros({b.numel}, DType::F32, MemCategory::Grads);
    for (const Slot& s : b.slots)
      s.param->bind_grad(b.flat.slice0(s.offset, s.offset + s.numel).view(s.param->value.shape()));
    b.comm =
        convert_ ? ctx.zeros({b.numel}, options.comm_dtype, MemCategory::Communication) : b.flat;
    if (options.reduce_scatter) {
      const int64_t sn = b.numel / parts;
      b.shard_comm = convert_ ? ctx.zeros({sn}, options.comm_dtype, MemCategory::Communication)
                              : ctx.zeros({sn}, DType::F32, MemCategory::Grads);
      b.shard = convert_ ? ctx.zeros({sn}, DType::F32, MemCategory::Grads) : b.shard_comm;
    }
  }
}

void GradBuckets::add_late_contribution(const Parameter& p) {
  const auto it = member_.find(&p);
  if (it != member_.end()) ++it->second.late;  // frozen parameters are in no bucket
}

void GradBuckets::begin_step(int micro_batches) {
  BRAID_CHECK(next_start_ == 0, "begin_step while the previous step's buckets are unfinished");
  BRAID_CHECK(micro_batches >= 1, "a step of {} micro-batches", micro_batches);
  micro_batches_ = micro_batches;
  for (Bucket& b : buckets_) b.ready = 0;
  for (auto& [p, m] : member_) m.heard = 0;
}

void GradBuckets::attach(MicroBatch& mb) {
  mb.on_grad_ready = [this](Parameter& p) { grad_ready(p); };
}

void GradBuckets::grad_ready(Parameter& p) {
  BRAID_CHECK(micro_batches_ > 0, "grad_ready for {} outside a step (begin_step first)", p.name);
  const auto it = member_.find(&p);
  BRAID_CHECK(it != member_.end(), "grad_ready for {}, which is in no bucket", p.name);
  Member& m = it->second;
  const int expected = micro_batches_ + m.late;
  BRAID_CHECK(m.heard < expected, "{} reported ready {} times in a step of {} contributions",
              p.name, m.heard + 1, expected);
  if (++m.heard < expected) return;  // accumulation: not final for the step yet
  (void)p.grad();  // a zeroing still deferred (no contribution wrote it) is written now
  Bucket& b = buckets_[m.bucket];
  BRAID_CHECK(b.ready < static_cast<int>(b.slots.size()) && !b.started,
              "{} final twice in one step", p.name);
  ++b.ready;
  start_ready_in_order();
}

void GradBuckets::start_ready_in_order() {
  while (next_start_ < buckets_.size() &&
         buckets_[next_start_].ready == static_cast<int>(buckets_[next_start_].slots.size()))
    start(buckets_[next_start_++]);
}

void GradBuckets::start(Bucket& b) {
  if (convert_) cast(ctx_, b.comm, b.flat);
  b.work = options_.reduce_scatter ? comm_.reduce_scatter(b.comm, b.shard_comm, options_.op)
                                   : comm_.all_reduce(b.comm, options_.op);
  b.started = true;
}

void GradBuckets::finish() {
  // A bucket whose parameters did not all report (a parameter the step never touched, or no
  // hook attached) still holds its final gradient now.
  while (next_start_ < buckets_.size()) start(buckets_[next_start_++]);
  for (Bucket& b : buckets_) {
    b.work.wait();
    if (convert_) {
      if (options_.reduce_scatter)
        cast(ctx_, b.shard, b.shard_comm);
      else
        cast(ctx_, b.flat, b.comm);
    }
    b.started = false;
    b.work = Work();
  }
  next_start_ = 0;
  micro_batches_ = 0;
}

int64_t GradBuckets::shard_numel(size_t b) const {
  return options_.reduce_scatter ? buckets_[b].numel / comm_.size() : buckets_[b].numel;
}

int64_t GradBuckets::shard_begin(size_t b) const {
  return options_.reduce_scatter ? shard_numel(b) * comm_.rank() : 0;
}

int64_t GradBuckets::total_numel() const {
  int64_t n = 0;
  for (const Bucket& b : buckets_) n += b.numel;
  return n;
}

}  // namespace braid
