// upload_small: host -> device copies through a ring of page-locked slots.
#include <algorithm>
#include <cstring>

#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/cuda_state.h"
#include "core/kernels/cuda/runtime.h"

namespace braid::cuda {

namespace {
constexpr size_t kSlots = 8;                   // two steps of (tokens, targets) x 2 micro-batches
constexpr size_t kMaxBytes = size_t{4} << 20;  // larger copies gain nothing from staging here
}  // namespace

PinnedRing::~PinnedRing() {
  for (Slot& s : slots) {
    try {
      if (s.pending) event_synchronize(s.event);
    } catch (...) {  // a failed device: free what can be freed
    }
    free_pinned(s.host);
    event_destroy(s.event);
  }
}

void upload_small(ExecContext& ctx, Tensor& dst, const Tensor& src) {
  BRAID_CHECK(src.device().is_cpu() && !dst.device().is_cpu() && src.nbytes() == dst.nbytes(),
              "upload_small: {} from {} into {} on {}", src.str(), src.device().str(), dst.str(),
              dst.device().str());
  const size_t bytes = src.nbytes();
  if (bytes == 0) return;
  void* stream = ctx.stream().handle;
  if (bytes > kMaxBytes) {
    copy_async(dst.raw(), src.raw(), bytes, stream);
    return;
  }
  PinnedRing& ring = state_of(ctx).pinned;
  if (ring.slots.empty()) ring.slots.resize(kSlots);
  PinnedRing::Slot& s = ring.slots[ring.next++ % ring.slots.size()];
  if (s.pending) event_synchronize(s.event);  // its copy, queued a ring ago, is long done
  s.pending = false;
  if (s.capacity < bytes) {
    free_pinned(s.host);
    s.host = nullptr;
    s.capacity = 0;
    const size_t cap = std::max<size_t>(bytes, 64 << 10);
    s.host = malloc_pinned(cap);
    s.capacity = cap;
  }
  if (!s.event) s.event = event_create();
  std::memcpy(s.host, src.raw(), bytes);
  copy_async(dst.raw(), s.host, bytes, stream);
  event_record(s.event, stream);
  s.pending = true;
}

}  // namespace braid::cuda
