// braid report's pieces: the PNG encoder (decoded back with zlib), metrics.jsonl reading and
// superseding, and the HTML page being self-contained.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "launch/report/metrics.h"
#include "launch/report/png.h"
#include "launch/report/report.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

uint32_t be32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3]));
}

TEST(Png, ChunksAndPixelsDecodeBack) {
  Image img(5, 3);
  img.set(0, 0, 0x112233);
  img.set(4, 2, 0xABCDEF);
  const std::string png = encode_png(img);
  ASSERT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // Walk the chunks, checking each CRC-32 over type + data.
  size_t at = 8;
  std::vector<std::string> types;
  std::string idat;
  while (at + 12 <= png.size()) {
    const uint32_t len = be32(png, at);
    const std::string type = png.substr(at + 4, 4);
    const std::string body = png.substr(at + 4, 4 + len);
    EXPECT_EQ(be32(png, at + 8 + len),
              crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())))
        << type;
    if (type == "IHDR") {
      EXPECT_EQ(be32(png, at + 8), 5u);
      EXPECT_EQ(be32(png, at + 12), 3u);
      EXPECT_EQ(png[at + 16], 8);  // bit depth
      EXPECT_EQ(png[at + 17], 2);  // RGB
    }
    if (type == "IDAT") idat += png.substr(at + 8, len);
    types.push_back(type);
    at += 12 + len;
  }
  EXPECT_EQ(at, png.size());
  ASSERT_EQ(types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
  std::string raw(3 * (1 + 5 * 3), '\0');
  uLongf n = raw.size();
  ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &n,
                       reinterpret_cast<const Bytef*>(idat.data()), idat.size()),
            Z_OK);
  ASSERT_EQ(n, raw.size());
  EXPECT_EQ(raw[0], 0);  // filter byte
  EXPECT_EQ(raw.substr(1, 3), "\x11\x22\x33");
  EXPECT_EQ(raw.substr(2 * 16 + 1 + 4 * 3, 3), "\xab\xcd\xef");
  EXPECT_EQ(raw.substr(4, 3), "\xff\xff\xff");  // untouched pixels are white
}

TEST(Png, PlotDrawsTheCurveColour) {
  const Image img =
      plot_lines_png({{"loss", "#ff0000", {{0, 3.0}, {10, 2.0}, {20, 1.5}}}}, 200, 120);
  int red = 0;
  for (size_t i = 0; i + 2 < img.rgb.size(); i += 3)
    red += img.rgb[i] == 0xff && img.rgb[i + 1] == 0 && img.rgb[i + 2] == 0;
  EXPECT_GT(red, 100);  // a 2-pixel line across ~100 pixels of plot width
}

TEST(NiceTicks, RoundSteps) {
  EXPECT_EQ(nice_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  const std::vector<double> t = nice_ticks(0.13, 0.61, 4);  // raw step 0.12 -> 0.2
  ASSERT_EQ(t.size(), 3u);
  EXPECT_NEAR(t[0], 0.2, 1e-15);
  EXPECT_NEAR(t[2], 0.6, 1e-15);
  EXPECT_EQ(nice_ticks(-3, 3, 3), (std::vector<double>{-2, 0, 2}));
  EXPECT_TRUE(nice_ticks(1, 1, 5).empty());
}

class MetricsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("braid_metrics_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& text) { std::ofstream(dir_ / "metrics.jsonl") << text; }
  std::string read(const char* name) {
    std::ifstream f(dir_ / name);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
  }
  fs::path dir_;
};

TEST_F(MetricsFile, ResumeSupersedesLaterRecords) {
  write(R"({"event":"start","step":0})"
        "\n"
        R"({"event":"train","step":2,"loss":3.0})"
        "\n"
        R"({"event":"checkpoint","step":2})"
        "\n"
        R"({"event":"train","step":4,"loss":2.5})"
        "\n"
        "not json\n");
  {
    MetricsLog log(dir_.string(), 10, 2);
    log.record("resume", {{"step", 2}});
    log.record("train", {{"step", 4}, {"loss", 2.4}});
  }
  const std::string now = read("metrics.jsonl");
  EXPECT_EQ(now.find("2.5"), std::string::npos) << now;
  EXPECT_NE(now.find("not json"), std::string::npos) << now;  // never thrown away
  EXPECT_NE(read("metrics.superseded.jsonl").find(R"("loss":2.5)"), std::string::npos);
  const RunMetrics m = read_metrics_jsonl((dir_ / "metrics.jsonl").string());
  ASSERT_EQ(m.series.at("loss").size(), 2u);  // one curve: steps 2 and 4
  EXPECT_EQ(m.bad_lines, "4");
  EXPECT_EQ(m.series.at("loss")[1], (std::pair<double, double>{4, 2.4}));
  // Every new record has an event and a wall-clock time.
  std::istringstream lines(now);
  std::string line, last;
  while (std::getline(lines, line)) last = line;
  const nlohmann::json j = nlohmann::json::parse(last);
  EXPECT_EQ(j["event"], "train");
  EXPECT_GT(j["time"].get<double>(), 1.6e9);
  // A tfevents file was started next to it.
  EXPECT_TRUE(fs::exists(fs::path(MetricsLog(dir_.string(), 10, 4).tfevents_path())));
}

TEST_F(MetricsFile, ReportPageIsSelfContained) {
  write(
      R"({"event":"train","step":1,"loss":3.0,"lr":0.001,"kernel_s":{"gemm":0.5,"other":0.1},"memory_mib":{"weights":1.5}})"
      "\n"
      R"({"event":"train","step":2,"loss":2.0,"lr":0.002,"kernel_s":{"gemm":0.5,"other":0.1}})"
      "\n"
      R"({"event":"eval","step":2,"val_loss":2.2})"
      "\n");
  const RunMetrics m = read_metrics_jsonl((dir_ / "metrics.jsonl").string());
  EXPECT_NEAR(m.kernel_seconds.at("gemm"), 1.0, 1e-12);
  const std::string html = render_report_html("<run>", m, "optim: {lr: 1}\n", "");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("&lt;run&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("val loss"), std::string::npos);
  EXPECT_NE(html.find("83.3%"), std::string::npos) << "gemm share of the kernel split";
}

}  // namespace
}  // namespace braid
