// Hugging Face Llama-family variants (Llama 2 / TinyLlama, SmolLM, linear / llama3 / yarn RoPE,
// Mistral's sliding window, Qwen2's q/k/v biases) made here as sharded HF directories,
// imported, and run: logits (full forward and KV-cache decoding) against transformers' own,
// stored by tools/make_hf_variants_reference.py. The weights are not stored: each element is
// a function of (tensor name, index) that this file and the script compute alike. Then the
// import is exported (sharded) and read back, and broken directories are refused by name.
//
// Tolerance: braid runs in f32, the reference in float64 rounded to f32. Logits reach ~17 in
// magnitude; measured errors are at most 6.2e-6, so 5e-5 + 1e-5 * |ref| leaves a tenfold margin
// while a wrong frequency, scale, window or bias moves logits by 0.1 or more.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/kernels/linear.h"
#include "core/safetensors.h"
#include "data/file_util.h"
#include "data_test_util.h"
#include "kernel_test_util.h"
#include "launch/config/config_json.h"
#include "launch/io/hf_export.h"
#include "launch/io/hf_format.h"
#include "launch/io/hf_weights.h"
#include "launch/io/model_io.h"

namespace braid {
namespace {

using json = nlohmann::json;
using braid::testing::TempDir;
using braid::testing::write_text;

constexpr double kAtol = 5e-5, kRtol = 1e-5;

// ---- the weights, exactly as tools/make_hf_variants_reference.py makes them ----
uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Tensor weight_value(const std::string& name, const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  const uint64_t key = fnv1a64(name);
  for (int64_t e = 0; e < t.numel(); ++e) {
    const uint64_t z = splitmix64(key ^ (static_cast<uint64_t>(e) * 0x9E3779B97F4A7C15ull));
    const double u = 2.0 * (static_cast<double>(z >> 40) / static_cast<double>(1 << 24)) - 1.0;
    double v;
    if (ends_with(name, "norm.weight"))
      v = 1.0 + 0.25 * u;
    else if (ends_with(name, ".bias"))
      v = 0.25 * u;
    else if (ends_with(name, "embed_tokens.weight"))
      v = u;
    else
      v = u * (1.0 / std::sqrt(static_cast<double>(shape.back()))) * 1.5;
    t.f32()[e] = static_cast<float>(v);
  }
  return t;
}

// ---- the reference file ----
struct Reference {
  SafetensorsFile file;
  json meta;
};

const Reference& reference() {
  static const Reference ref = [] {
    SafetensorsFile f = SafetensorsFile::open(std::string(BRAID_SOURCE_DIR) +
                                              "/tests/data/hf_variants_reference.safetensors");
    json meta = json::parse(f.metadata().at("reference"));
    return Reference{std::move(f), std::move(meta)};
  }();
  return ref;
}

// Writes the variant as an HF directory: config.json and its tensors in `shards` files with
// model.safetensors.index.json, laid out as transformers' save_pretrained lays them out.
void write_hf_dir(const std::filesystem::path& dir, const json& variant, int shards) {
  write_text((dir / "config.json").string(), variant.at("config").dump(2));
  const json& params = variant.at("params");
  const size_t n = params.size(), per = (n + shards - 1) / shards;
  json map = json::object();
  for (int s = 0; s < shards; ++s) {
    const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards);
    NamedTensors tensors;
    for (size_t i = s * per; i < std::min(n, (s + 1) * per); ++i) {
      const std::string name = params[i][0].get<std::string>();
      tensors.emplace_back(name, weight_value(name, params[i][1].get<Shape>()));
      map[name] = file;
    }
    save_safetensors((dir / file).string(), tensors, {{"format", "pt"}});
  }
  write_text((dir / kHfIndexFile).string(),
             json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump(2));
}

// Every position's logits (B * T, V) by the training forward's kernels.
Tensor logits_of(LoadedModel& lm, const Tensor& tokens) {
  ExecContext& ctx = *lm.ctx;
  Transformer& model = *lm.model;
  const ModelConfig& cfg = model.config();
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = cfg.n_embd, V = cfg.vocab_size;
  Tensor h = model.forward_eval(ctx, tokens);
  InferState st{ctx};
  Tensor hn = model.child(model.num_slots() - 1).infer(h, st).view({B * T, C});
  Parameter* head =
      model.find_parameter(cfg.tied() ? "model.embed_tokens.weight" : "lm_head.weight");
  BRAID_CHECK(head, "no LM head");
  Tensor logits = Tensor::empty({B * T, V});
  linear_forward(ctx, logits, hn, head->value, Tensor());
  return logits;
}

void expect_logits(const Tensor& got, const float* want, int64_t n, const std::string& what) {
  ASSERT_EQ(got.numel(), n) << what;
  double worst = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::abs(static_cast<double>(got.f32()[i]) - want[i]);
    worst = std::max(worst, err);
    if (!(err <= kAtol + kRtol * std::abs(want[i]))) ++bad;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << n << " logits off, largest error " << worst;
}

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : reference().meta.at("variants").items()) names.push_back(name);
  return names;
}

class HfVariant : public ::testing::TestWithParam<std::string> {
 protected:
  const json& variant() const { return reference().meta.at("variants").at(GetParam()); }
  Tensor tokens() const { return reference().file.get(GetParam() + "/tokens"); }
  Tensor want() const { return reference().file.get(GetParam() + "/logits"); }
};

TEST_P(HfVariant, ShardedImportMatchesTransformers) {
  TempDir dir("hf_variant");
  write_hf_dir(dir.path(), variant(), 3);
  LoadedModel lm = load_model(dir.path().string());
  const Tensor w = want();
  expect_logits(logits_of(lm, tokens()), w.f32(), w.numel(), GetParam() + " forward");
}

// KV-cache decoding one token at a time: RoPE at each absolute position and the window over
// the cache, as `braid generate` runs them.
TEST_P(HfVariant, DecodingMatchesTransformers) {
  TempDir dir("hf_variant_decode");
  write_hf_dir(dir.path(), variant(), 2);
  LoadedModel lm = load_model(dir.path().string());
  const Tensor tok = tokens(), w = want();
  const int64_t T = tok.dim(1), V = lm.model->config().vocab_size;
  KVCache cache = lm.model->make_cache(*lm.ctx, T);
  for (int64_t t = 0; t < T; ++t) {
    Tensor one = Tensor::from_vector_i32({tok.i32()[t]}, {1, 1});
    const Tensor logits = lm.model->decode(*lm.ctx, one, cache);
    expect_logits(logits, w.f32() + t * V, V, fmt::format("{} decode position {}", GetParam(), t));
  }
}

// Export writes the variant back (model_type, RoPE keys, biases, window) in shards; reading
// that gives the same config and the same logits bit for bit.
TEST_P(HfVariant, ShardedExportRoundTrip) {
  TempDir dir("hf_variant_src"), out("hf_variant_out");
  write_hf_dir(dir.path(), variant(), 1);
  LoadedModel lm = load_model(dir.path().string());
  HfExport how;
  how.max_shard_bytes = 6000;  // several shards for these tiny models
  const auto files = write_hf_model(out.path(), lm.model->config(), named_weights(*lm.model), how);
  ASSERT_GT(files.size(), 2u);
  EXPECT_EQ(files.back(), kHfIndexFile);
  const json exported = read_json_file(out.file("config.json"), "config");
  EXPECT_EQ(exported["model_type"],
            variant()["config"]["model_type"].get<std::string>() == "qwen2"
                ? "qwen2"
                : (variant()["config"]["model_type"] == "mistral" ? "mistral" : "llama"));
  EXPECT_TRUE(std::filesystem::exists(out.path() / "generation_config.json"));
  LoadedModel back = load_model(out.path().string());
  EXPECT_EQ(fields_to_json(back.model->config()), fields_to_json(lm.model->config()));
  const Tensor a = logits_of(lm, tokens()), b = logits_of(back, tokens());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "export changed the model";
}

INSTANTIATE_TEST_SUITE_P(All, HfVariant, ::testing::ValuesIn(variant_names()),
                         [](const auto& info) { return info.param; });

// ---- broken directories and configs are refused by name ----
std::string import_error(const std::filesystem::path& dir) {
  try {
    load_model(dir.string());
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no UserError)";
}

const json& llama_variant() { return reference().meta.at("variants").at("llama"); }

TEST(HfImportErrors, IndexNamingAMissingShard) {
  TempDir dir("hf_missing_shard");
  write_hf_dir(dir.path(), llama_variant(), 3);
  std::filesystem::remove(dir.path() / "model-00002-of-00003.safetensors");
  const std::string msg = import_error(dir.path());
  EXPECT_NE(msg.find("model-00002-of-00003.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  EXPECT_NE(msg.find(kHfIndexFile), std::string::npos) << msg;
}

TEST(HfImportErrors, IndexNamingATensorItsShardLacks) {
  TempDir dir("hf_missing_in_shard");
  write_hf_dir(dir.path(), llama_variant(), 2);
  json index = read_json_file(dir.file(kHfIndexFile), "index");
  index["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";  // it is in 2
  write_text(dir.file(kHfIndexFile), index.dump());
  const std::string msg = import_error(dir.path());
  EXPECT_NE(msg.find("model.norm.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model-00001-of-00002.safetensors"), std::string::npos) << msg;
}

TEST(HfImportErrors, MissingTensor) {
  TempDir dir("hf_missing_tensor");
  write_hf_dir(dir.path(), llama_variant(), 2);
  json index = read_json_file(dir.file(kHfIndexFile), "index");
  index["weight_map"].erase("model.layers.1.mlp.up_proj.weight");
  write_text(dir.file(kHfIndexFile), index.dump());
  const std::string msg = import_error(dir.path());
  EXPECT_NE(msg.find("missing tensor model.layers.1.mlp.up_proj.weight"), std::string::npos) << msg;
}

TEST(HfImportErrors, ShardOutsideTheDirectory) {
  TempDir dir("hf_shard_path");
  write_hf_dir(dir.path(), llama_variant(), 2);
  json index = read_json_file(dir.file(kHfIndexFile), "index");
  index["weight_map"]["model.norm.weight"] = "../model-00002-of-00002.safetensors";
  write_text(dir.file(kHfIndexFile), index.dump());
  EXPECT_NE(import_error(dir.path()).find("expected the name of a file beside the index"),
            std::string::npos);
}

// Config keys braid cannot run are refused with the key (and value) named.
std::string config_error_of(const json& config) {
  try {
    model_config_from_hf(config, "config.json");
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no UserError)";
}

TEST(HfImportErrors, UnsupportedSettingsNamed) {
  const json base = llama_variant().at("config");
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {[](json& c) {
         c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
       },
       {"rope_scaling", "\"dynamic\""}},
      {[](json& c) {
         c["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 1e4}};
       },
       {"rope_parameters", "\"longrope\""}},
      {[](json& c) {
         c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"alpha", 1}};
       },
       {"rope_scaling", "field \"alpha\"", "factor"}},
      {[](json& c) {
         c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
       },
       {"low_freq_factor"}},
      {[](json& c) { c["partial_rotary_factor"] = 0.5; }, {"partial_rotary_factor"}},
      {[](json& c) {
         c["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 1e4}, {"factor", 2.0}};
         c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
       },
       {"rope_parameters", "rope_scaling", "different"}},
      {[](json& c) { c["model_type"] = "gemma"; }, {"model_type", "\"gemma\""}},
      {[](json& c) { c["attention_bias"] = true; }, {"attention_bias"}},
      {[](json& c) { c["sliding_window"] = 16; }, {"sliding_window"}},
      {[](json& c) {
         c["model_type"] = "qwen2";
         c["use_sliding_window"] = true;
         c["sliding_window"] = 8;
         c["max_window_layers"] = 1;
       },
       {"max_window_layers"}},
      {[](json& c) {
         c["model_type"] = "mistral";
         c["sliding_window"] = 8;
         c["layer_types"] = {"full_attention", "sliding_attention"};
       },
       {"layer_types"}},
  };
  for (const Case& c : cases) {
    json cfg = base;
    c.edit(cfg);
    const std::string msg = config_error_of(cfg);
    for (const std::string& e : c.expect) EXPECT_NE(msg.find(e), std::string::npos) << msg;
  }
}

// The keys the variants need are read into braid's config as the HF names say.
TEST(HfImport, VariantKeysRead) {
  const json& v = reference().meta.at("variants");
  const ModelConfig mistral = model_config_from_hf(v.at("mistral").at("config"), "m");
  EXPECT_EQ(mistral.sliding_window, 4);
  EXPECT_FALSE(mistral.qkv_bias);
  const ModelConfig qwen = model_config_from_hf(v.at("qwen2").at("config"), "q");
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_EQ(qwen.sliding_window, 0);  // use_sliding_window false
  EXPECT_TRUE(qwen.tied());
  const ModelConfig l3 = model_config_from_hf(v.at("llama3").at("config"), "l");
  EXPECT_EQ(l3.rope_type, RopeType::Llama3);
  EXPECT_EQ(l3.rope_factor, 8.0f);
  EXPECT_EQ(l3.rope_original_context, 32);
  const ModelConfig yarn = model_config_from_hf(v.at("yarn").at("config"), "y");
  EXPECT_EQ(yarn.rope_type, RopeType::Yarn);
  EXPECT_EQ(yarn.rope_original_context, 32);
  const ModelConfig lin = model_config_from_hf(v.at("llama_linear").at("config"), "y");
  EXPECT_EQ(lin.rope_type, RopeType::Linear);
  EXPECT_EQ(lin.rope_factor, 2.0f);
}

TEST(HfWeightsWriter, ShardsLikeTransformers) {
  TempDir dir("hf_shards");
  std::vector<HfTensorOut> t;
  for (int i = 0; i < 5; ++i)  // 400 bytes each
    t.push_back({fmt::format("t{}", i), {100}, DType::F32, [] { return Tensor::zeros({100}); }});
  t.push_back({"big", {500}, DType::F32, [] { return Tensor::zeros({500}); }});
  const auto files = save_hf_weights(dir.path(), t, 1000);
  // [t0 t1] [t2 t3] [t4] [big]: a shard closes when the next tensor would overflow it, and a
  // tensor above the limit gets a file of its own.
  ASSERT_EQ(files.size(), 5u);
  const json index = read_json_file(dir.file(kHfIndexFile), "index");
  EXPECT_EQ(index["metadata"]["total_size"], 4000);
  EXPECT_EQ(index["weight_map"]["t1"], "model-00001-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["t2"], "model-00002-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["t4"], "model-00003-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["big"], "model-00004-of-00004.safetensors");
  // Below the limit: one model.safetensors and no index.
  TempDir one("hf_one");
  EXPECT_EQ(save_hf_weights(one.path(), t, 1u << 20), std::vector<std::string>{kHfWeightsFile});
  EXPECT_FALSE(std::filesystem::exists(one.path() / kHfIndexFile));
}

TEST(HfWeightsWriter, ByteSizes) {
  EXPECT_EQ(parse_byte_size("5GB", "x"), 5000000000ull);
  EXPECT_EQ(parse_byte_size("500MB", "x"), 500000000ull);
  EXPECT_EQ(parse_byte_size("2GiB", "x"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("64kib", "x"), 65536ull);
  EXPECT_EQ(parse_byte_size("1234", "x"), 1234ull);
  for (const char* bad : {"", "GB", "5XB", "-5GB", "0", "1.5GB"})
    EXPECT_THROW(parse_byte_size(bad, "--max-shard-size"), UserError) << bad;
}

}  // namespace
}  // namespace braid
