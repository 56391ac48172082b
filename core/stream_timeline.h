// The profiler's device timeline on a GPU stream: each mark is a timing CUDA event recorded on
// the stream; drain() waits for the last one and reads the gaps between consecutive events.
// Events are reused once drained, so a step costs one event record per kernel-scope transition
// and no allocation after the first steps.
#pragma once

#include <vector>

#include "core/profile.h"

namespace braid {

class StreamTimeline final : public DeviceTimeline {
 public:
  explicit StreamTimeline(void* stream) : stream_(stream) {}
  ~StreamTimeline() override;
  StreamTimeline(const StreamTimeline&) = delete;
  StreamTimeline& operator=(const StreamTimeline&) = delete;

  void mark() override;
  size_t pending() const override { return marks_.size(); }
  std::vector<double> drain() override;

 private:
  void* stream_;
  std::vector<void*> marks_;  // recorded, in stream order
  std::vector<void*> free_;   // drained, ready to record again
};

}  // namespace braid
