// Config values written back: dump/load round trips exactly, scalar conversions, docs in sync.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include "launch/config/config.h"
#include "launch/config/config_schema.h"
#include "launch/config/config_json.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

// Changes every field to a value unlike its default (awkward floats and strings included).
struct Mutate {
  void operator()(bool* p) const { *p = !*p; }
  void operator()(int* p) const { *p = *p * 3 - 7; }
  void operator()(int64_t* p) const { *p = std::numeric_limits<int64_t>::min() + *p; }
  void operator()(uint64_t* p) const { *p = UINT64_MAX - *p; }
  void operator()(float* p) const { *p = std::nextafter(*p * 1.37f + 0.1f, 1e30f); }
  void operator()(double* p) const { *p = std::nextafter(*p * 1.37 + 0.1, 1e300); }
  void operator()(std::string* p) const { *p += " \"q\" \\ #x: [y]\n\t\x01 é"; }
  void operator()(std::vector<std::string>* p) const {
    p->push_back("null");
    p->push_back("");
  }
  void operator()(std::vector<int>* p) const { p->insert(p->end(), {7, -1, 0}); }
  void operator()(std::optional<int>* p) const {
    *p = p->has_value() ? std::nullopt : std::optional<int>(-3);
  }
  void operator()(std::optional<bool>* p) const {
    *p = p->has_value() ? std::nullopt : std::optional<bool>(false);
  }
  // An enum takes the spelling after its current one.
  void operator()(const EnumField& e) const {
    const auto names = e.names();
    const auto it = std::find(names.begin(), names.end(), e.name(e.field));
    ASSERT_NE(it, names.end());
    EXPECT_TRUE(e.set(e.field, it + 1 == names.end() ? names.front() : *(it + 1)));
  }
};

TEST(ConfigRoundTrip, EveryFieldSurvivesDumpAndParse) {
  RunConfig changed;
  auto fields = list_config_fields(changed);
  for (auto& f : fields) std::visit(Mutate{}, f.ptr);
  // Every field really differs from the default, so a field the dump drops is caught below.
  EXPECT_EQ(config_differences(RunConfig{}, changed).size(), fields.size());
  const std::string text = dump_run_config(changed);
  const RunConfig back = parse_run_config(text, "dump.yaml");
  const auto diffs = config_differences(changed, back);
  EXPECT_TRUE(diffs.empty()) << diffs.front() << "\n" << text;
  for (const auto& f : fields)
    EXPECT_NE(text.find("  " + f.key + ": "), std::string::npos) << f.full_key();
}

TEST(ConfigRoundTrip, SavedConfigLoadsBackIdentical) {
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("braid_test_config_save_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const RunConfig q = load_run_config(BRAID_SOURCE_DIR "/configs/quickstart.yaml",
                                      {"optim.lr=0.0012345678", "train.peak_tflops=0.1"});
  const fs::path path = dir / "config.yaml";
  save_run_config(q, path);
  save_run_config(q, path);  // replacing an existing file works too
  const RunConfig back = load_run_config(path.string(), {});
  const auto diffs = config_differences(q, back);
  EXPECT_TRUE(diffs.empty()) << diffs.front();
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1)
      << "the temporary file was left behind";
  EXPECT_THROW(save_run_config(q, dir / "missing" / "config.yaml"), UserError);
  fs::remove_all(dir);
}

// The resolved config of a run that sets every typed field (enums, auto-or-number, lists of
// block counts) is written with the spellings YAML takes and reads back the same.
TEST(ConfigRoundTrip, TypedFieldsSurviveTheRunDirectoryConfig) {
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("braid_test_config_typed_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const RunConfig q =
      load_run_config(BRAID_SOURCE_DIR "/configs/quickstart.yaml",
                      {"train.precision=fp16", "train.checkpointing=full", "parallel.dp=2",
                       "parallel.pp=2", "parallel.pp_split=[1, 3]", "model.tie_embeddings=false"});
  const fs::path path = dir / "config.yaml";
  save_run_config(q, path);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* line : {"  precision: fp16\n", "  checkpointing: full\n", "  dp: 2\n",
                           "  pp_split: [1, 3]\n", "  tie_embeddings: false\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  const RunConfig back = load_run_config(path.string(), {});
  const auto diffs = config_differences(q, back);
  EXPECT_TRUE(diffs.empty()) << diffs.front();
  EXPECT_EQ(back.train.precision, Precision::FP16);
  EXPECT_EQ(back.parallel.pp_split, (std::vector<int>{1, 3}));
  // The defaults are written as auto.
  const std::string defaults = dump_run_config(RunConfig{});
  EXPECT_NE(defaults.find("  dp: auto\n"), std::string::npos);
  EXPECT_NE(defaults.find("  tie_embeddings: auto\n"), std::string::npos);
  EXPECT_NE(defaults.find("  checkpointing: none\n"), std::string::npos);
  fs::remove_all(dir);
}

// Checkpoint manifests hold the model section as JSON: enums by name, tie_embeddings as the
// -1/0/1 every braid version wrote, so old checkpoints resume and compare equal.
TEST(ConfigJson, ModelSectionKeepsItsManifestEncoding) {
  ModelConfig m;
  EXPECT_EQ(fields_to_json(m).at("tie_embeddings"), -1);
  m.tie_embeddings = true;
  EXPECT_EQ(fields_to_json(m).at("tie_embeddings"), 1);
  m.tie_embeddings = false;
  EXPECT_EQ(fields_to_json(m).at("tie_embeddings"), 0);
  for (const auto& [j, want] : std::vector<std::pair<nlohmann::json, std::optional<bool>>>{
           {-1, std::nullopt}, {0, false}, {1, true}, {true, true}, {nullptr, std::nullopt}}) {
    ModelConfig r;
    r.tie_embeddings = !want.value_or(false);  // differs from what is read
    fields_from_json(r, nlohmann::json{{"tie_embeddings", j}}, "manifest.json");
    EXPECT_EQ(r.tie_embeddings, want) << j.dump();
  }
  ModelConfig r;
  try {
    fields_from_json(r, nlohmann::json{{"tie_embeddings", 2}}, "manifest.json");
    ADD_FAILURE() << "tie_embeddings 2 was read";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("manifest.json: key 'tie_embeddings' is 2; expected -1"),
              std::string::npos)
        << e.what();
  }
  // An enum field is its name; a name it does not have is refused with the choices.
  TrainConfig t;
  t.checkpointing = Checkpointing::Selective;
  const nlohmann::json tj = fields_to_json(t);
  EXPECT_EQ(tj.at("checkpointing"), "selective");
  EXPECT_EQ(tj.at("precision"), "fp32");
  TrainConfig t2;
  fields_from_json(t2, tj, "x.json");
  EXPECT_EQ(t2.checkpointing, Checkpointing::Selective);
  try {
    fields_from_json(t2, nlohmann::json{{"precision", "fp8"}}, "x.json");
    ADD_FAILURE() << "fp8 was read";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: key 'precision' is 'fp8'; expected fp32, bf16 "
                                         "or fp16"),
              std::string::npos)
        << e.what();
  }
}

TEST(ConfigRoundTrip, DifferencesNameKeyAndValues) {
  RunConfig a, b;
  b.optim.lr = 1e-3f;
  b.model.n_layer = 2;
  const auto d = config_differences(a, b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], "model.n_layer: 12 -> 2");
  EXPECT_EQ(d[1], "optim.lr: 0.0003 -> 0.001");
}

// Formats a value, reads it back through YAML, and returns what came back.
template <class T>
T through_yaml(T v) {
  const std::string text = format_field(FieldPtr(&v));
  T back{};
  const auto err = read_field(YAML::Load(text), FieldPtr(&back));
  EXPECT_FALSE(err) << text << ": " << *err;
  return back;
}

TEST(ConfigScalars, FloatsRoundTripBitExactly) {
  std::mt19937 rng(7);
  std::vector<float> fs_ = {0.0f,
                            -0.0f,
                            1e-45f,
                            1e-40f,
                            std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::min(),
                            0.1f,
                            3e-4f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (int i = 0; i < 8000; ++i) {
    const float f = std::bit_cast<float>(uint32_t(rng()));
    if (!std::isnan(f)) fs_.push_back(f);
  }
  for (float f : fs_)
    EXPECT_EQ(std::bit_cast<uint32_t>(through_yaml(f)), std::bit_cast<uint32_t>(f)) << f;
  std::vector<double> ds = {0.1, 1e-320, std::numeric_limits<double>::max(), -2.5e-300};
  for (int i = 0; i < 8000; ++i) {
    const double d = std::bit_cast<double>((uint64_t(rng()) << 32) | rng());
    if (!std::isnan(d)) ds.push_back(d);
  }
  for (double d : ds)
    EXPECT_EQ(std::bit_cast<uint64_t>(through_yaml(d)), std::bit_cast<uint64_t>(d)) << d;
  EXPECT_TRUE(std::isnan(through_yaml(std::numeric_limits<float>::quiet_NaN())));
}

TEST(ConfigScalars, IntegerEdgesRoundTrip) {
  for (int v : {0, -1, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()})
    EXPECT_EQ(through_yaml(v), v);
  for (int64_t v :
       {int64_t(0), std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()})
    EXPECT_EQ(through_yaml(v), v);
  for (uint64_t v : {uint64_t(0), UINT64_MAX}) EXPECT_EQ(through_yaml(v), v);
  for (bool v : {true, false}) EXPECT_EQ(through_yaml(v), v);
}

// The error read_field gives for `text` into a T (empty when it is accepted).
template <class T>
std::string error_for(const std::string& text, T* out = nullptr) {
  T v{};
  const auto err = read_field(YAML::Load(text), FieldPtr(out ? out : &v));
  return err ? *err : "";
}

TEST(ConfigScalars, TypeChecks) {
  EXPECT_EQ(error_for<bool>("yes"), "expected true or false, got 'yes'");
  EXPECT_EQ(error_for<bool>("1"), "expected true or false, got '1'");
  EXPECT_EQ(error_for<bool>("false"), "");
  EXPECT_EQ(error_for<int>("1.5"), "expected an integer, got '1.5'");
  EXPECT_EQ(error_for<int>("2147483648"),
            "expected an integer in [-2147483648, 2147483647], got '2147483648'");
  EXPECT_EQ(error_for<int>("-2147483648"), "");
  EXPECT_EQ(error_for<int>("--3"), "expected an integer, got '--3'");
  EXPECT_EQ(error_for<int64_t>("99999999999999999999"),
            "expected an integer in [-9223372036854775808, 9223372036854775807], got "
            "'99999999999999999999'");
  EXPECT_EQ(error_for<uint64_t>("-1"), "expected a non-negative integer, got '-1'");
  EXPECT_EQ(error_for<float>("fast"), "expected a number, got 'fast'");
  EXPECT_EQ(error_for<float>("inf"), "expected a number, got 'inf'");
  EXPECT_EQ(error_for<float>("1e39"),
            "expected a number within the range of a 32-bit float, got '1e39'");
  EXPECT_EQ(error_for<double>("1e39"), "");
  EXPECT_EQ(error_for<std::string>("~"),
            "expected a string, got nothing (null) (write \"\" for an empty string)");
  EXPECT_EQ(error_for<std::string>("{a: 1}"), "expected a string, got a mapping");
  EXPECT_EQ(error_for<std::vector<std::string>>("[a, [b]]"),
            "expected a list of strings, but item 1 is a list");
  int i = 0;
  EXPECT_EQ(error_for<int>("+0x1f", &i), "");
  EXPECT_EQ(i, 31);
  float f = 0;
  EXPECT_EQ(error_for<float>("-.inf", &f), "");
  EXPECT_EQ(f, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(error_for<float>("+2", &f), "");
  EXPECT_EQ(f, 2.0f);
}

// Cells of a Markdown table row, split on '|' that are not escaped.
std::vector<std::string> row_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cur;
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '|' && line[i - 1] != '\\') {
      const size_t b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cur.substr(b, e - b + 1));
      cur.clear();
    } else {
      cur += line[i];
    }
  }
  return cells;
}

// Every key of every section appears in docs/config.md under its section with its type and
// default, and the docs name no key that does not exist.
TEST(ConfigDocs, ReferenceMatchesStructs) {
  std::ifstream in(BRAID_SOURCE_DIR "/docs/config.md");
  ASSERT_TRUE(in) << "docs/config.md is missing";
  std::map<std::string, std::vector<std::string>> documented;  // full key -> cells
  std::string section, line;
  while (std::getline(in, line)) {
    if (line.rfind("## `", 0) == 0) {
      section = line.substr(4, line.find('`', 4) - 4);
    } else if (line.rfind("| `", 0) == 0 && !section.empty()) {
      auto cells = row_cells(line);
      ASSERT_GE(cells.size(), 3u) << line;
      documented[section + "." + cells[0].substr(1, cells[0].size() - 2)] = cells;
    }
  }
  RunConfig defaults;
  const auto fields = list_config_fields(defaults);
  for (const auto& f : fields) {
    auto it = documented.find(f.full_key());
    if (it == documented.end()) {
      ADD_FAILURE() << f.full_key() << " is not in docs/config.md";
      continue;
    }
    std::string dflt;  // as a table cell: a bare '|' would end it
    for (char c : format_field(f.ptr)) {
      if (c == '|') dflt += '\\';
      dflt += c;
    }
    EXPECT_EQ(it->second[1], field_type_name(f.ptr)) << f.full_key();
    EXPECT_EQ(it->second[2], fmt::format("`{}`", dflt))
        << f.full_key() << ": default in docs is stale";
  }
  EXPECT_EQ(documented.size(), fields.size()) << "docs/config.md documents keys that do not exist";
  // The generator itself covers every key.
  const std::string generated = config_reference_markdown();
  for (const auto& f : fields) EXPECT_NE(generated.find("| `" + f.key + "` |"), std::string::npos);
}

}  // namespace
}  // namespace braid
