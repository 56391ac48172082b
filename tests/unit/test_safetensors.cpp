// safetensors: round trips, a hand-built file, and rejection of every malformed header case.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/safetensors.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

// A fresh scratch directory per test, removed afterwards.
class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("braid_st_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes the u64 length (or `length_override`), the header text and `data` verbatim.
  std::string write_raw(const std::string& name, const std::string& header, const std::string& data,
                        int64_t length_override = -1) {
    const std::string p = path(name);
    std::ofstream f(p, std::ios::binary);
    const uint64_t n =
        length_override >= 0 ? static_cast<uint64_t>(length_override) : header.size();
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
    f << header << data;
    return p;
  }

  fs::path dir_;
};

void expect_user_error(const std::function<void()>& fn, const std::string& path,
                       const std::string& keyword) {
  try {
    fn();
    ADD_FAILURE() << "expected a UserError mentioning '" << keyword << "'";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(keyword), std::string::npos) << msg;
  }
}

TEST_F(Safetensors, RoundTripSeveralDtypesAndShapes) {
  Tensor a = Tensor::from_vector({1.5f, -2.0f, 3.25f, 0.0f, 1e-8f, -7.0f}, {2, 3});
  Tensor b = Tensor::empty({5}, DType::BF16);
  for (int i = 0; i < 5; ++i)
    b.data<bf16>()[i] = float_to_bf16(0.5f * static_cast<float>(i) - 1.0f);
  Tensor c = Tensor::empty({3, 1}, DType::F16);
  for (int i = 0; i < 3; ++i) c.data<f16>()[i] = float_to_f16(static_cast<float>(i) + 0.25f);
  Tensor d = Tensor::from_vector_i32({7, -3, 2147483647}, {3});
  Tensor scalar = Tensor::from_vector({42.0f}, {});
  Tensor empty = Tensor::empty({0, 4}, DType::F32);
  const std::vector<std::pair<std::string, Tensor>> ts = {
      {"z.last_name_first", a}, {"b", b}, {"c", c}, {"d", d}, {"scalar", scalar}, {"empty", empty}};
  const std::string p = path("x.safetensors");
  save_safetensors(p, ts, {{"format", "pt"}, {"note", "hello"}});
  EXPECT_FALSE(fs::exists(p + ".tmp"));
  EXPECT_EQ(fs::file_size(p) % 8, 0u);  // header padding keeps the 8-byte aligned buffer start

  SafetensorsFile f = SafetensorsFile::open(p);
  std::vector<std::string> names;
  for (const auto& [n, t] : ts) names.push_back(n);
  EXPECT_EQ(f.names(), names);  // written in the given order
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "hello");
  for (const auto& [n, t] : ts) {
    EXPECT_EQ(f.shape(n), t.shape()) << n;
    EXPECT_EQ(f.dtype(n), t.dtype()) << n;
    Tensor r = f.get(n);
    EXPECT_EQ(r.shape(), t.shape()) << n;
    EXPECT_EQ(r.dtype(), t.dtype()) << n;
    ASSERT_EQ(r.nbytes(), t.nbytes()) << n;
    if (t.nbytes()) {
      EXPECT_EQ(std::memcmp(r.raw(), t.raw(), t.nbytes()), 0) << n;
    }
  }
  EXPECT_EQ(f.info("scalar").shape, Shape{});
  EXPECT_EQ(f.get("scalar").numel(), 1);
  EXPECT_EQ(f.info("empty").begin, f.info("empty").end);
  // Moving keeps the mapping valid.
  SafetensorsFile g = std::move(f);
  EXPECT_FLOAT_EQ(g.get("z.last_name_first").f32()[2], 3.25f);
}

// widen_16bit (checkpoint model files): bf16 and f16 tensors are stored as f32, exactly; other
// dtypes as they are.
TEST_F(Safetensors, Widen16BitWritesF32Exactly) {
  Tensor b = Tensor::empty({4}, DType::BF16);
  for (int i = 0; i < 4; ++i)
    b.data<bf16>()[i] = float_to_bf16(1.0f / 3.0f * static_cast<float>(i + 1));
  Tensor h = Tensor::empty({2}, DType::F16);
  for (int i = 0; i < 2; ++i) h.data<f16>()[i] = float_to_f16(-0.1f * static_cast<float>(i + 1));
  const Tensor q = Tensor::zeros({3}, DType::U8), a = Tensor::from_vector({1.25f}, {1});
  const std::string p = path("w.safetensors");
  save_safetensors(p, {{"b", b}, {"h", h}, {"q", q}, {"a", a}}, {}, /*widen_16bit=*/true);
  SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.dtype("b"), DType::F32);
  EXPECT_EQ(f.dtype("h"), DType::F32);
  EXPECT_EQ(f.dtype("q"), DType::U8);
  EXPECT_EQ(f.dtype("a"), DType::F32);
  EXPECT_TRUE(kernel_test::bitwise_equal(f.get("b"), b.to(DType::F32)));
  EXPECT_TRUE(kernel_test::bitwise_equal(f.get("h"), h.to(DType::F32)));
  EXPECT_EQ(f.get("a").f32()[0], 1.25f);
}

TEST_F(Safetensors, EmptyFileRoundTrips) {
  const std::string p = path("none.safetensors");
  save_safetensors(p, {});
  SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_TRUE(f.names().empty());
  EXPECT_TRUE(f.metadata().empty());
}

TEST_F(Safetensors, HandBuiltFileLoads) {
  // 1.5f = 0x3fc00000, -2.0f = 0xc0000000, 0.25f = 0x3e800000, little-endian.
  const std::string header =
      R"({"__metadata__":{"k":"v"},"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
      R"("i":{"dtype":"I32","shape":[1,1],"data_offsets":[12,16]}})";
  const std::string data("\x00\x00\xc0\x3f\x00\x00\x00\xc0\x00\x00\x80\x3e\x05\x01\x00\x00", 16);
  const std::string p = write_raw("hand.safetensors", header, data);
  SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"w", "i"}));
  EXPECT_EQ(f.metadata().at("k"), "v");
  Tensor w = f.get("w");
  EXPECT_EQ(w.shape(), Shape{3});
  EXPECT_EQ(w.f32()[0], 1.5f);
  EXPECT_EQ(w.f32()[1], -2.0f);
  EXPECT_EQ(w.f32()[2], 0.25f);
  Tensor i = f.get("i");
  EXPECT_EQ(i.shape(), (Shape{1, 1}));
  EXPECT_EQ(i.i32()[0], 261);
}

TEST_F(Safetensors, RejectsMalformedFiles) {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');
  struct Case {
    std::string name, header, data, keyword;
    int64_t length = -1;
  };
  const std::vector<Case> cases = {
      {"len_too_big", "{" + ok_entry + "}", eight, "header length", 1000},
      {"not_json", "{\"a\": [1,", "", "not valid JSON"},
      {"not_object", "[1, 2]", "", "expected a JSON object"},
      {"no_dtype", R"({"a":{"shape":[2],"data_offsets":[0,8]}})", eight, "dtype"},
      {"no_shape", R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", eight, "shape"},
      {"no_offsets", R"({"a":{"dtype":"F32","shape":[2]}})", eight, "data_offsets"},
      {"unknown_dtype", R"({"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", eight,
       "unknown dtype"},
      {"negative_dim", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight,
       "dimension"},
      {"out_of_range", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight,
       "data buffer has only 8 bytes"},
      {"end_before_begin", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight,
       "end before begin"},
      {"size_mismatch", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight,
       "takes 12 bytes"},
      {"overlap", "{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       std::string(12, '\0'), "overlaps"},
      {"gap", "{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
       std::string(20, '\0'), "gap of 4 bytes"},
      {"trailing", "{" + ok_entry + "}", std::string(12, '\0'), "no trailing bytes"},
      {"duplicate", "{" + ok_entry + "," + ok_entry + "}", eight, "more than once"},
      {"bad_metadata", R"({"__metadata__":{"k":1}})", "", "__metadata__"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string p = write_raw(c.name + ".safetensors", c.header, c.data, c.length);
    expect_user_error([&] { SafetensorsFile::open(p); }, p, c.keyword);
  }

  const std::string shorty = path("short.safetensors");
  std::ofstream(shorty, std::ios::binary) << "abcde";
  expect_user_error([&] { SafetensorsFile::open(shorty); }, shorty, "shorter than");
  expect_user_error([&] { SafetensorsFile::open(path("missing.safetensors")); },
                    path("missing.safetensors"), "cannot be opened");
}

TEST_F(Safetensors, UnknownNameAndUnsupportedDtypeOnRead) {
  const std::string header = R"({"big":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
                             R"("f":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  const std::string p = write_raw("i64.safetensors", header, std::string(12, '\0'));
  SafetensorsFile f = SafetensorsFile::open(p);  // valid file; only I64 is unreadable
  EXPECT_EQ(f.get("f").f32()[0], 0.0f);
  EXPECT_EQ(f.info("big").dtype_name, "I64");
  EXPECT_FALSE(f.info("big").dtype.has_value());
  expect_user_error([&] { f.get("big"); }, p, "I64");
  expect_user_error([&] { f.get("nope"); }, p, "no tensor named 'nope'");
  expect_user_error([&] { f.shape("nope"); }, p, "nope");
}

}  // namespace
}  // namespace braid
