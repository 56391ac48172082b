// tfevents: CRC32C, TFRecord framing and the hand-encoded Event/Summary protobuf fields.
#include "launch/report/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace braid {

namespace {

std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

// Protobuf wire format: a key is (field number << 3) | wire type.
enum WireType : uint8_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void put_key(std::string& out, int field, WireType t) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | t);
}
template <class T>
void put_le(std::string& out, T v) {  // fixed-width fields are little-endian
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(reinterpret_cast<const char*>(b), sizeof(T));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

// tensorflow.Event fields: 1 wall_time (double), 2 step (int64), 3 file_version (string),
// 5 summary (Summary), 7 session_log (SessionLog). Summary: 1 value (repeated Value). Value: 1 tag,
// 2 simple_value (float).
std::string event_header(double wall_time, int64_t step) {
  std::string e;
  put_key(e, 1, kFixed64);
  put_le(e, wall_time);
  if (step != 0) {  // proto3 leaves default values out
    put_key(e, 2, kVarint);
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes) {
  static const std::array<uint32_t, 256> table = make_crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < bytes; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t bytes) {
  const uint32_t c = crc32c(data, bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(const std::string& data) {
  std::string out;
  std::string len;
  put_le(len, static_cast<uint64_t>(data.size()));
  out += len;
  put_le(out, masked_crc32c(len.data(), len.size()));
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()));
  return out;
}

std::string tf_event_file_version(double wall_time) {
  std::string e = event_header(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string tf_event_scalars(double wall_time, int64_t step,
                             const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, 1, tag);
    put_key(v, 2, kFixed32);
    put_le(v, value);
    put_bytes(summary, 1, v);
  }
  std::string e = event_header(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

std::string tf_event_session_start(double wall_time, int64_t step) {
  std::string log;  // SessionLog: 1 status (enum; START = 1)
  put_key(log, 1, kVarint);
  put_varint(log, 1);
  std::string e = event_header(wall_time, step);
  put_bytes(e, 7, log);  // Event field 7: session_log (6 is the deprecated log_message)
  return e;
}

TfEventsWriter::TfEventsWriter(const std::string& dir) {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  const double now = std::floor(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  // The PID keeps two runs started in the same second (a resume right after a stop) apart.
  path_ = fmt::format("{}/events.out.tfevents.{:.0f}.{}.{}", dir, now, host, ::getpid());
  file_ = std::fopen(path_.c_str(), "ab");
  BRAID_USER_CHECK(file_ != nullptr, "cannot create {}: {}", path_, std::strerror(errno));
  write_record(tf_event_file_version(now));
}

TfEventsWriter::~TfEventsWriter() {
  if (file_) std::fclose(file_);
}

void TfEventsWriter::scalars(double wall_time, int64_t step,
                             const std::vector<std::pair<std::string, float>>& values) {
  write_record(tf_event_scalars(wall_time, step, values));
}

void TfEventsWriter::session_start(double wall_time, int64_t step) {
  write_record(tf_event_session_start(wall_time, step));
}

void TfEventsWriter::write_record(const std::string& data) {
  if (failed_) return;
  const std::string rec = tfrecord_frame(data);
  if (std::fwrite(rec.data(), 1, rec.size(), file_) != rec.size() || std::fflush(file_) != 0) {
    failed_ = true;
    std::fprintf(stderr, "warning: cannot write %s (%s); no more TensorBoard events this run\n",
                 path_.c_str(), std::strerror(errno));
  }
}

}  // namespace braid
