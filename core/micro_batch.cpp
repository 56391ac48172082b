// MicroBatch: the deferred weight-gradient queue.
#include "core/micro_batch.h"

namespace braid {

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
