// MicroBatch: recomputation hooks on the stash and the deferred weight-gradient queue.
#include "core/micro_batch.h"

namespace braid {

void MicroBatch::push(Tensor t) {
  // Drop hooks whose tensor is gone: its address may be handed out again.
  std::erase_if(recomputable_, [](const Recomputable& r) { return r.storage.expired(); });
  if (t.defined()) {
    for (const Recomputable& r : recomputable_) {
      if (r.data == t.raw() && r.shape == t.shape()) {
        stash_.push_recipe(r.recipe);
        return;
      }
    }
  }
  stash_.push(std::move(t));
}

void MicroBatch::recompute_later(const Tensor& t, std::function<Tensor()> rebuild) {
  auto r = std::make_shared<Recipe>();
  r->rebuild = std::move(rebuild);
  recomputable_.push_back({t.weak_storage(), t.raw(), t.shape(), std::move(r)});
}

void MicroBatch::adopt_deferred(MicroBatch& other) {
  for (Deferred& d : other.queue_) queue_.push_back(std::move(d));
  other.queue_.clear();
}

void MicroBatch::defer(std::function<void()> work, std::vector<Parameter*> params) {
  queue_.push_back({std::move(work), std::move(params)});
}

void MicroBatch::run_deferred() {
  // Swap first: work may not queue more, and a throw leaves no half-run queue behind.
  std::vector<Deferred> q;
  q.swap(queue_);
  for (Deferred& d : q) {
    d.work();
    for (Parameter* p : d.params) grad_ready(*p);
  }
}

std::vector<SampleSpan> sample_spans(const Tensor& sample_starts) {
  BRAID_CHECK(sample_starts.ndim() == 2 && sample_starts.dtype() == DType::I32 &&
                  sample_starts.device().is_cpu(),
              "sample_starts must be a (B, T) i32 host tensor, got {}", sample_starts.str());
  const int64_t B = sample_starts.dim(0), T = sample_starts.dim(1);
  const int32_t* p = sample_starts.i32();
  std::vector<SampleSpan> out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      if (p[b * T + t] == t) {
        if (t > 0) out.back().end = t;
        out.push_back({b, t, T});
      } else {
        BRAID_CHECK(t > 0 && p[b * T + t] == p[b * T + t - 1],
                    "sample_starts[{}, {}] is {}; expected {} or the previous position's start",
                    b, t, p[b * T + t], t);
      }
  return out;
}

Tensor span_view(const Tensor& x, const SampleSpan& s) {
  Shape rows = x.shape();
  const int64_t T = rows.at(1);
  rows.erase(rows.begin());
  rows[0] = x.dim(0) * T;
  Shape one = x.shape();
  one[0] = 1;
  one[1] = s.end - s.begin;
  return x.view(rows).slice0(s.row * T + s.begin, s.row * T + s.end).view(one);
}

}  // namespace braid
