// Loading YAML configs: values, located errors with suggestions, --set overrides, paths.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launch/config/config.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

// A scratch directory per test; YAML files written there are loaded by path.
class ConfigLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("braid_test_config_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "cfg");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& text, const std::string& name = "cfg/run.yaml") {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  // The message of the UserError that loading throws (a test failure when none is thrown).
  static std::string load_error(const std::string& path,
                                const std::vector<std::string>& sets = {}) {
    try {
      load_run_config(path, sets);
    } catch (const UserError& e) {
      return e.what();
    }
    ADD_FAILURE() << "loading " << path << " did not throw";
    return "";
  }
  fs::path dir_;
};

// A valid body; tests append or replace lines.
const std::string kData = "data:\n  dir: shards\n";

TEST_F(ConfigLoad, OneNameIsAListOfOne) {
  // PEFT configs write target_modules: all-linear; braid takes the same for any list.
  const RunConfig c = load_run_config(
      write(kData + "lora:\n  rank: 4\n  targets: all-linear\n"), {"optim.no_decay=bias"});
  EXPECT_EQ(c.lora.targets, std::vector<std::string>{"all-linear"});
  EXPECT_EQ(c.optim.no_decay, std::vector<std::string>{"bias"});
  EXPECT_TRUE(load_run_config(write(kData), {}).lora.targets.empty());  // default by family
}

TEST_F(ConfigLoad, GoodFileLoadsValuesAndKeepsDefaults) {
  const std::string path = write(
      "# comment\n"
      "run:\n  name: tiny\n"
      "model:\n  vocab_size: 512\n  context_length: 128\n  n_embd: 64\n  n_head: 4\n"
      "  norm_eps: 1e-6\n  seed: 18446744073709551615\n"
      "data:\n  dir: ../shards/tiny\n  seq_len: 64\n"
      "optim:\n  lr: 3e-3\n  no_decay: [bias, ln_]\n"
      "train:\n  steps: 7\n  peak_tflops: 12.5\n  sample_prompt: \"The \"\n"
      "checkpoint:\n");
  const RunConfig c = load_run_config(path, {});
  EXPECT_EQ(c.run.name, "tiny");
  EXPECT_EQ(c.model.vocab_size, 512);
  EXPECT_EQ(c.model.context_length, 128);
  EXPECT_EQ(c.model.n_embd, 64);
  EXPECT_EQ(c.model.norm_eps, 1e-6f);
  EXPECT_EQ(c.model.seed, UINT64_MAX);
  EXPECT_EQ(c.data.seq_len, 64);
  EXPECT_EQ(c.optim.lr, 3e-3f);
  EXPECT_EQ(c.optim.no_decay, (std::vector<std::string>{"bias", "ln_"}));
  EXPECT_EQ(c.train.steps, 7);
  EXPECT_EQ(c.train.peak_tflops, 12.5);
  EXPECT_EQ(c.train.sample_prompt, "The ");
  // Relative data.dir is resolved against the config file's directory and stored absolute.
  EXPECT_EQ(c.data.dir, (dir_ / "shards" / "tiny").string());
  // Keys not in the file keep their defaults.
  const RunConfig d;
  EXPECT_EQ(c.model.n_layer, d.model.n_layer);
  EXPECT_EQ(c.optim.warmup_steps, d.optim.warmup_steps);
  EXPECT_EQ(c.checkpoint.keep_last, d.checkpoint.keep_last);
  EXPECT_EQ(c.run.dir, d.run.dir);
}

TEST_F(ConfigLoad, AbsoluteDataDirIsKept) {
  const RunConfig c = load_run_config(write("data:\n  dir: /srv/tokens\n"), {});
  EXPECT_EQ(c.data.dir, "/srv/tokens");
}

TEST_F(ConfigLoad, ShippedConfigsLoad) {
  const RunConfig q = load_run_config(BRAID_SOURCE_DIR "/configs/quickstart.yaml", {});
  EXPECT_EQ(q.model.vocab_size, 512);
  EXPECT_EQ(q.model.n_layer, 4);
  EXPECT_EQ(q.data.micro_batch, 16);
  EXPECT_EQ(q.optim.lr, 3e-3f);
  EXPECT_EQ(q.train.steps, 600);
  EXPECT_EQ(q.train.sample_prompt, "The ");
  EXPECT_EQ(q.data.dir,
            (fs::path(BRAID_SOURCE_DIR) / "data" / "quickstart").lexically_normal().string());
  const RunConfig b = load_run_config(BRAID_SOURCE_DIR "/configs/bench_gpt2.yaml", {});
  EXPECT_EQ(b.model.vocab_size, 8192);
  EXPECT_EQ(b.model.n_embd, 512);
  EXPECT_EQ(b.train.steps, 20);
}

TEST_F(ConfigLoad, MissingFileNamesThePath) {
  const std::string path = (dir_ / "nope.yaml").string();
  const std::string msg = load_error(path);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
}

TEST_F(ConfigLoad, MalformedYamlNamesFileAndLine) {
  const std::string path = write("run:\n  name: x\nmodel:\n  n_layer: [1, 2\n  n_head: 4\n");
  const std::string msg = load_error(path);
  EXPECT_NE(msg.find("run.yaml:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed YAML"), std::string::npos) << msg;
  const std::string path2 = write("run:\n  name: x\n   dir: y\n", "cfg/indent.yaml");
  const std::string msg2 = load_error(path2);
  EXPECT_NE(msg2.find("indent.yaml:3"), std::string::npos) << msg2;
}

TEST_F(ConfigLoad, UnknownKeySuggestsClosest) {
  const std::string msg = load_error(write(kData + "optim:\n  lr: 1e-3\n  warmup: 10\n"));
  EXPECT_NE(msg.find("run.yaml:5:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("optim.warmup"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean `optim.warmup_steps`?"), std::string::npos) << msg;
  // A key put under the wrong section is found in its own.
  const std::string msg2 = load_error(write(kData + "train:\n  lr: 1e-3\n"));
  EXPECT_NE(msg2.find("run.yaml:4:"), std::string::npos) << msg2;
  EXPECT_NE(msg2.find("did you mean `optim.lr`?"), std::string::npos) << msg2;
}

TEST_F(ConfigLoad, UnknownSectionSuggestsClosest) {
  const std::string msg = load_error(write(kData + "optimizer:\n  lr: 1e-3\n"));
  EXPECT_NE(msg.find("run.yaml:3:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("`optimizer`"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean `optim`?"), std::string::npos) << msg;
}

TEST_F(ConfigLoad, StructureErrors) {
  EXPECT_NE(load_error(write("- a\n- b\n")).find("run.yaml:1:"), std::string::npos);
  const std::string sec = load_error(write("optim: 3\n"));
  EXPECT_NE(sec.find("run.yaml:1:"), std::string::npos) << sec;
  EXPECT_NE(sec.find("`optim`"), std::string::npos) << sec;
  const std::string dup = load_error(write(kData + "optim:\n  lr: 1e-3\n  lr: 2e-3\n"));
  EXPECT_NE(dup.find("run.yaml:5:"), std::string::npos) << dup;
  EXPECT_NE(dup.find("optim.lr"), std::string::npos) << dup;
  EXPECT_NE(dup.find("twice"), std::string::npos) << dup;
}

// Each wrong value names file:line, the full key and what was expected.
TEST_F(ConfigLoad, WrongTypesAreLocated) {
  struct Case {
    std::string yaml, line_key, expected;
  };
  const std::vector<Case> cases = {
      {"optim:\n  lr: fast\n", "run.yaml:4: optim.lr", "expected a number, got 'fast'"},
      {"optim:\n  warmup_steps: 1.5\n", "run.yaml:4: optim.warmup_steps",
       "expected an integer, got '1.5'"},
      {"train:\n  steps: 3000000000\n", "run.yaml:4: train.steps",
       "expected an integer in [-2147483648, 2147483647]"},
      {"model:\n  seed: -1\n", "run.yaml:4: model.seed",
       "expected a non-negative integer, got '-1'"},
      {"model:\n  family: [gpt2]\n", "run.yaml:4: model.family", "expected a string, got a list"},
      {"optim:\n  no_decay: {bias: 1}\n", "run.yaml:4: optim.no_decay", "expected a list of strings"},
      {"optim:\n  lr:\n", "run.yaml:4: optim.lr", "expected a number, got nothing"},
      {"optim:\n  beta1: 1e999\n", "run.yaml:4: optim.beta1", "range of a 32-bit float"},
  };
  for (const auto& c : cases) {
    const std::string msg = load_error(write(kData + c.yaml));
    EXPECT_NE(msg.find(c.line_key), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
  }
}

// A value outside an enum's spellings names the file, line, key, the value and every allowed
// value, in the file and in --set alike.
TEST_F(ConfigLoad, EnumErrorsNameKeyValueAndChoices) {
  struct Case {
    std::string yaml, line_key, value, choices;
  };
  const std::vector<Case> cases = {
      {"train:\n  precision: fp64\n", "run.yaml:4: train.precision", "'fp64'",
       "expected fp32, bf16 or fp16"},
      {"train:\n  precision: FP32\n", "run.yaml:4: train.precision", "'FP32'",
       "expected fp32, bf16 or fp16"},
      {"train:\n  checkpointing: partial\n", "run.yaml:4: train.checkpointing", "'partial'",
       "expected none, full or selective"},
      {"train:\n  checkpointing: [full]\n", "run.yaml:4: train.checkpointing", "a list",
       "expected none, full or selective"},
      {"parallel:\n  dp: two\n", "run.yaml:4: parallel.dp", "'two'", "expected auto or an integer"},
      {"parallel:\n  pp_split: [3, x]\n", "run.yaml:4: parallel.pp_split", "'x'",
       "item 1: expected an integer"},
      {"model:\n  tie_embeddings: 2\n", "run.yaml:4: model.tie_embeddings", "'2'",
       "expected auto, true or false"},
  };
  for (const auto& c : cases) {
    const std::string msg = load_error(write(kData + c.yaml));
    EXPECT_NE(msg.find(c.line_key), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.value), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.choices), std::string::npos) << msg;
  }
  const std::string set = load_error(write(kData), {"train.precision=f16"});
  EXPECT_NE(set.find("--set train.precision=f16: train.precision: expected fp32, bf16 or fp16, "
                     "got 'f16'"),
            std::string::npos)
      << set;
  // Outside YAML (command-line options, JSON files) parse_enum says the same with the key.
  try {
    parse_enum<Checkpointing>("train.checkpointing", "some");
    ADD_FAILURE() << "'some' parsed";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "train.checkpointing");
    EXPECT_STREQ(e.what(), "train.checkpointing is 'some'; expected none, full or selective");
  }
  EXPECT_EQ(parse_enum<Precision>("train.precision", "bf16"), Precision::BF16);
}

// Typed values reach the structs; earlier spellings (a quoted number for dp, quoted block
// counts, -1/0/1 for tie_embeddings, quoted enum names as older resolved configs wrote them)
// mean what they meant.
TEST_F(ConfigLoad, TypedValuesAndEarlierSpellings) {
  const RunConfig c =
      load_run_config(write(kData + "train:\n  precision: bf16\n  checkpointing: selective\n"
                                    "parallel:\n  dp: 2\n  pp: 2\n  pp_split: [1, 3]\n"
                                    "model:\n  n_layer: 4\n  tie_embeddings: false\n"),
                      {});
  EXPECT_EQ(c.train.precision, Precision::BF16);
  EXPECT_EQ(precision_dtype(c.train.precision), DType::BF16);
  EXPECT_EQ(c.train.checkpointing, Checkpointing::Selective);
  EXPECT_EQ(c.parallel.dp, 2);
  EXPECT_EQ(c.parallel.pp_split, (std::vector<int>{1, 3}));
  EXPECT_EQ(c.model.tie_embeddings, false);
  EXPECT_FALSE(c.model.tied());
  const RunConfig old = load_run_config(
      write(kData + "train:\n  precision: \"bf16\"\n  checkpointing: \"selective\"\n"
                    "parallel:\n  dp: \"2\"\n  pp: 2\n  pp_split: [\"1\", \"3\"]\n"
                    "model:\n  n_layer: 4\n  tie_embeddings: 0\n"),
      {});
  EXPECT_TRUE(config_differences(c, old).empty()) << config_differences(c, old).front();
  const RunConfig d = load_run_config(write(kData), {});
  EXPECT_FALSE(d.parallel.dp.has_value());  // auto
  EXPECT_FALSE(d.model.tie_embeddings.has_value());
  EXPECT_TRUE(d.model.tied());  // gpt2's default
  for (const auto& [text, want] :
       std::vector<std::pair<std::string, std::optional<bool>>>{{"-1", std::nullopt},
                                                                {"auto", std::nullopt},
                                                                {"1", true},
                                                                {"true", true},
                                                                {"0", false}}) {
    const RunConfig t = load_run_config(write(kData), {"model.tie_embeddings=" + text});
    EXPECT_EQ(t.model.tie_embeddings, want) << text;
  }
  EXPECT_FALSE(load_run_config(write(kData), {"parallel.dp=auto", "parallel.dp=auto"})
                   .parallel.dp.has_value());
  // Validation of the typed values names the key.
  EXPECT_NE(load_error(write(kData), {"parallel.dp=0"}).find("parallel.dp: dp is 0; expected auto"),
            std::string::npos);
  EXPECT_NE(load_error(write(kData), {"parallel.pp_split=[2, 0]"})
                .find("parallel.pp_split: pp_split holds 0; expected a list of block counts >= 1"),
            std::string::npos);
}

// run.init_from names the model; a model key the file gives anyway must agree with it, and the
// error says both values as the config spells them.
TEST_F(ConfigLoad, ModelKeysMustAgreeWithInitFrom) {
  fs::create_directories(dir_ / "hf");
  std::ofstream(dir_ / "hf" / "config.json")
      << R"({"model_type": "gpt2", "vocab_size": 256, "n_positions": 64, "n_embd": 32,
             "n_layer": 2, "n_head": 2, "tie_word_embeddings": false})";
  const std::string base = kData + "  seq_len: 32\nrun:\n  init_from: ../hf\n";
  const RunConfig c = load_run_config(write(base + "model:\n  tie_embeddings: 0\n"), {});
  EXPECT_EQ(c.model.tie_embeddings, false);
  EXPECT_EQ(c.model.n_layer, 2);
  const std::string msg = load_error(write(base + "model:\n  tie_embeddings: true\n"));
  EXPECT_NE(msg.find("run.yaml:7: model.tie_embeddings: model.tie_embeddings is true but "
                     "run.init_from"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("has false; drop the key"), std::string::npos) << msg;
  const std::string layers = load_error(write(base), {"model.n_layer=3"});
  EXPECT_NE(layers.find("model.n_layer is 3 but run.init_from"), std::string::npos) << layers;
}

TEST_F(ConfigLoad, ValidationErrorsAreLocated) {
  const std::string msg = load_error(write(kData + "optim:\n  warmup_steps: 5\n  lr: -1\n"));
  EXPECT_NE(msg.find("run.yaml:5: optim.lr"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected > 0"), std::string::npos) << msg;
  // A key left at an invalid default is named, with the file, and how to set it.
  const std::string dflt = load_error(write("run:\n  name: x\n"));
  EXPECT_NE(dflt.find("run.yaml"), std::string::npos) << dflt;
  EXPECT_NE(dflt.find("data.dir"), std::string::npos) << dflt;
  EXPECT_NE(dflt.find("not set in the file"), std::string::npos) << dflt;
  // ConfigError carries the full key for callers.
  try {
    load_run_config(write(kData + "model:\n  n_head: 5\n"), {});
    ADD_FAILURE() << "n_head 5 with n_embd 768 loaded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "model.n_embd");
  }
}

TEST_F(ConfigLoad, CrossSectionSeqLenAtMostContext) {
  const std::string msg =
      load_error(write("model:\n  context_length: 128\ndata:\n  dir: x\n  seq_len: 256\n"));
  EXPECT_NE(msg.find("run.yaml:5: data.seq_len"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.context_length is 128 ("), std::string::npos) << msg;
  EXPECT_NE(msg.find("run.yaml:2"), std::string::npos) << msg;
  EXPECT_NO_THROW(load_run_config(
      write("model:\n  context_length: 128\ndata:\n  dir: x\n  seq_len: 128\n"), {}));
}

TEST_F(ConfigLoad, OverridesApplyInOrderAndAreTypeChecked) {
  const std::string path = write(kData + "optim:\n  lr: 1e-3\n");
  const RunConfig c =
      load_run_config(path, {"optim.lr=2e-3", "optim.no_decay=[bias, wte]", "run.name=a",
                             "run.name=b", "train.sample_prompt=\"x: y\"", "model.seed=0x10"});
  EXPECT_EQ(c.optim.lr, 2e-3f);
  EXPECT_EQ(c.optim.no_decay, (std::vector<std::string>{"bias", "wte"}));
  EXPECT_EQ(c.run.name, "b");
  EXPECT_EQ(c.train.sample_prompt, "x: y");
  EXPECT_EQ(c.model.seed, 16u);

  const std::string type = load_error(path, {"optim.lr=fast"});
  EXPECT_NE(type.find("--set optim.lr=fast: optim.lr: expected a number, got 'fast'"),
            std::string::npos)
      << type;
  const std::string unknown = load_error(path, {"optim.lrr=1"});
  EXPECT_NE(unknown.find("--set optim.lrr=1"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("did you mean `optim.lr`?"), std::string::npos) << unknown;
  const std::string section = load_error(path, {"optm.lr=1"});
  EXPECT_NE(section.find("did you mean `optim`?"), std::string::npos) << section;
  const std::string bare = load_error(path, {"warmup_steps=3"});
  EXPECT_NE(bare.find("did you mean `optim.warmup_steps`?"), std::string::npos) << bare;
  EXPECT_NE(load_error(path, {"optim.lr"}).find("expected section.key=value"), std::string::npos);
  EXPECT_NE(load_error(path, {"train.steps=1.5"}).find("expected an integer"), std::string::npos);
  // Values are validated after overrides, and the override is named.
  const std::string range = load_error(path, {"optim.lr=-1"});
  EXPECT_NE(range.find("--set optim.lr=-1: optim.lr"), std::string::npos) << range;
  EXPECT_NE(range.find("expected > 0"), std::string::npos) << range;
}

TEST_F(ConfigLoad, ApplyOverrideAlone) {
  RunConfig c;
  apply_override(c, "checkpoint.keep_last=9");
  EXPECT_EQ(c.checkpoint.keep_last, 9);
  EXPECT_THROW(apply_override(c, "checkpoint.keep_last=many"), ConfigError);
  EXPECT_EQ(c.checkpoint.keep_last, 9);  // a rejected value leaves the field alone
}

// run.init_from and lora.init_from resolve alike: in the file relative to the file, with --set
// relative to the working directory.
TEST_F(ConfigLoad, InitFromPathsResolveLikeDataDir) {
  fs::create_directories(dir_ / "hf");
  std::ofstream(dir_ / "hf" / "config.json")
      << R"({"model_type": "gpt2", "vocab_size": 256, "n_positions": 64, "n_embd": 32,
             "n_layer": 2, "n_head": 2})";
  const std::string want = (dir_ / "hf").lexically_normal().string();
  const std::string data = kData + "  seq_len: 32\n";
  const RunConfig r = load_run_config(write(data + "run:\n  init_from: ../hf\n"), {});
  EXPECT_EQ(r.run.init_from, want);
  const RunConfig l =
      load_run_config(write(data + "lora:\n  rank: 2\n  init_from: ../hf\n"), {});
  EXPECT_EQ(l.lora.init_from, want);
  const RunConfig set = load_run_config(write(data), {"lora.init_from=some/model"});
  EXPECT_EQ(set.lora.init_from, (fs::current_path() / "some" / "model").string());
}

TEST_F(ConfigLoad, OverriddenRelativeDataDirIsRelativeToWorkingDirectory) {
  const RunConfig c = load_run_config(write(kData), {"data.dir=some/where"});
  EXPECT_EQ(c.data.dir, (fs::current_path() / "some" / "where").string());
}

}  // namespace
}  // namespace braid
