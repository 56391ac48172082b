// tfevents encoding: CRC32C and its masking against published vectors, TFRecord framing, and
// the bytes of one hand-encoded Event.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "launch/report/tensorboard.h"

namespace braid {
namespace {

uint64_t le64(const std::string& s, size_t at) {
  uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}
uint32_t le32(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

TEST(TensorBoard, Crc32cKnownVectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  // RFC 3720 (iSCSI) appendix B.4: 32 bytes of zeros, 32 bytes of 0xff.
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // Masking: rotate right 15, add 0xa282ead8.
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, RecordFraming) {
  const std::string data = "hello tfrecord";
  const std::string rec = tfrecord_frame(data);
  ASSERT_EQ(rec.size(), 8 + 4 + data.size() + 4);
  EXPECT_EQ(le64(rec, 0), data.size());
  EXPECT_EQ(le32(rec, 8), masked_crc32c(rec.data(), 8));
  EXPECT_EQ(rec.substr(12, data.size()), data);
  EXPECT_EQ(le32(rec, 12 + data.size()), masked_crc32c(data.data(), data.size()));
}

TEST(TensorBoard, ScalarEventBytes) {
  // Event{wall_time: 1.5, step: 3, summary{value{tag: "a", simple_value: 2.0}}}
  const std::string want(
      "\x09\x00\x00\x00\x00\x00\x00\xf8\x3f"  // 1: double 1.5
      "\x10\x03"                              // 2: varint 3
      "\x2a\x0a"                              // 5: Summary, 10 bytes
      "\x0a\x08"                              //   1: Value, 8 bytes
      "\x0a\x01\x61"                          //     1: tag "a"
      "\x15\x00\x00\x00\x40",                 //     2: float 2.0
      23);
  EXPECT_EQ(tf_event_scalars(1.5, 3, {{"a", 2.0f}}), want);
  // A step past 127 takes a two-byte varint: 300 = 0xac 0x02.
  EXPECT_EQ(tf_event_scalars(1.5, 300, {}).substr(9, 3), std::string("\x10\xac\x02", 3));
  // Event{wall_time: 1.5, step: 5, session_log{status: START}}
  EXPECT_EQ(tf_event_session_start(1.5, 5).substr(9), std::string("\x10\x05\x3a\x02\x08\x01", 6));
  const std::string v = tf_event_file_version(0.0);
  EXPECT_NE(v.find("brain.Event:2"), std::string::npos);
  EXPECT_EQ(v[9], '\x1a');  // field 3, length-delimited
}

}  // namespace
}  // namespace braid
