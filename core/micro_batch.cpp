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

}  // namespace braid
