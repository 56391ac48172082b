#include "core/stream_timeline.h"

#include "core/kernels/cuda/runtime.h"

namespace braid {

StreamTimeline::~StreamTimeline() {
  for (void* e : marks_) cuda::event_destroy(e);
  for (void* e : free_) cuda::event_destroy(e);
}

void StreamTimeline::mark() {
  void* e = nullptr;
  if (free_.empty()) {
    e = cuda::timing_event_create();
  } else {
    e = free_.back();
    free_.pop_back();
  }
  cuda::event_record(e, stream_);
  marks_.push_back(e);
}

std::vector<double> StreamTimeline::drain() {
  std::vector<double> gaps;
  if (marks_.empty()) return gaps;
  cuda::event_synchronize(marks_.back());
  gaps.reserve(marks_.size() - 1);
  for (size_t i = 0; i + 1 < marks_.size(); ++i)
    gaps.push_back(1e-3 * static_cast<double>(cuda::event_elapsed_ms(marks_[i], marks_[i + 1])));
  free_.insert(free_.end(), marks_.begin(), marks_.end() - 1);
  marks_.erase(marks_.begin(), marks_.end() - 1);
  return gaps;
}

}  // namespace braid
