// TensorBoard event files (tfevents) written without TensorFlow or a protobuf library.
//
// A tfevents file is a sequence of TFRecords: uint64 length (little-endian), masked CRC32C of
// those 8 bytes, the data, masked CRC32C of the data. Each record's data is a serialized
// tensorflow.Event; the first has file_version "brain.Event:2", the others a step, a wall time
// and a Summary of simple_value scalars (or a SessionLog START marking a restart). Only those few
// protobuf fields are encoded, by hand.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace braid {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78); crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t bytes);
// TFRecord's masking: rotate right by 15 and add 0xa282ead8 (a CRC stored inside CRC'd data
// would otherwise be easy to confuse).
uint32_t masked_crc32c(const void* data, size_t bytes);
// One TFRecord holding `data`.
std::string tfrecord_frame(const std::string& data);

// Serialized tensorflow.Event messages.
std::string tf_event_file_version(double wall_time);
std::string tf_event_scalars(double wall_time, int64_t step,
                             const std::vector<std::pair<std::string, float>>& scalars);
// Event{session_log{status: START}} at `step`: TensorBoard's readers then drop every earlier
// event at step >= `step`, which is how a resumed run hides what the attempt it replaces
// logged past its checkpoint (metrics.jsonl moves those records aside likewise).
std::string tf_event_session_start(double wall_time, int64_t step);

// Writes events.out.tfevents.<unix seconds>.<host>.<pid> into a directory. Every write is
// flushed, like metrics.jsonl; a failed write (a full disk) warns once on stderr and the writer
// goes quiet, since losing TensorBoard plots must not end a training run.
class TfEventsWriter {
 public:
  explicit TfEventsWriter(const std::string& dir);
  ~TfEventsWriter();
  TfEventsWriter(const TfEventsWriter&) = delete;
  TfEventsWriter& operator=(const TfEventsWriter&) = delete;

  void scalars(double wall_time, int64_t step,
               const std::vector<std::pair<std::string, float>>& values);
  void session_start(double wall_time, int64_t step);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
  bool failed_ = false;
};

}  // namespace braid
