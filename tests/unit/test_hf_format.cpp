// HF format: config.json round trips, exact GPT-2 Conv1D transposes, import leniency and errors.
#include <gtest/gtest.h>

#include <functional>

#include "launch/io/hf_format.h"

namespace braid {
namespace {

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no UserError)";
}

void expect_same_model(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.context_length, b.context_length);
  EXPECT_EQ(a.n_layer, b.n_layer);
  EXPECT_EQ(a.n_embd, b.n_embd);
  EXPECT_EQ(a.n_head, b.n_head);
  EXPECT_EQ(a.n_kv_head, b.n_kv_head);
  EXPECT_EQ(a.ffn_hidden, b.ffn_hidden);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.tie_embeddings, b.tie_embeddings);
  EXPECT_EQ(a.init_std, b.init_std);
}

ModelConfig tiny_gpt2() {
  ModelConfig c;
  c.vocab_size = 7;
  c.context_length = 5;
  c.n_layer = 2;
  c.n_embd = 4;
  c.n_head = 2;
  return c;
}

ModelConfig tiny_llama() {
  ModelConfig c;
  c.family = "llama";
  c.vocab_size = 9;
  c.context_length = 16;
  c.n_layer = 1;
  c.n_embd = 8;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.ffn_hidden = 12;
  return c;
}

// Every parameter filled with distinct values so any misplaced element shows.
NamedTensors make_params(const ModelConfig& c, float start) {
  NamedTensors p;
  float v = start;
  for (const auto& [name, shape] : parameter_shapes(c)) {
    Tensor t = Tensor::empty(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = v++;
    p.emplace_back(name, t);
  }
  return p;
}

TEST(HfFormat, Gpt2ConfigRoundTrip) {
  ModelConfig c;  // GPT-2 small defaults
  const nlohmann::json j = hf_config_json(c);
  EXPECT_EQ(j["model_type"], "gpt2");
  EXPECT_EQ(j["architectures"][0], "GPT2LMHeadModel");
  EXPECT_TRUE(j["n_inner"].is_null());
  EXPECT_EQ(j["n_positions"], 1024);
  EXPECT_EQ(j["layer_norm_epsilon"].get<double>(), 1e-5);  // no float noise
  EXPECT_EQ(j["activation_function"], "gelu_new");
  EXPECT_EQ(j["tie_word_embeddings"], true);
  expect_same_model(model_config_from_hf(j, "config.json"), c);

  ModelConfig d = tiny_gpt2();
  d.ffn_hidden = 24;
  d.tie_embeddings = false;
  d.norm_eps = 1e-6f;
  const nlohmann::json k = hf_config_json(d);
  EXPECT_EQ(k["n_inner"], 24);
  EXPECT_EQ(k["tie_word_embeddings"], false);
  expect_same_model(model_config_from_hf(k, "config.json"), d);
}

TEST(HfFormat, LlamaConfigRoundTrip) {
  ModelConfig c = tiny_llama();
  c.norm_eps = 1e-6f;
  c.rope_theta = 500000.0f;
  c.tie_embeddings = true;
  const nlohmann::json j = hf_config_json(c);
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(j["intermediate_size"], 12);
  EXPECT_EQ(j["num_key_value_heads"], 2);
  EXPECT_EQ(j["hidden_act"], "silu");
  EXPECT_EQ(j["rope_theta"].get<double>(), 500000.0);
  expect_same_model(model_config_from_hf(j, "config.json"), c);

  ModelConfig d = tiny_llama();
  d.n_kv_head = 0;
  d.ffn_hidden = 0;
  const nlohmann::json k = hf_config_json(d);
  EXPECT_EQ(k["intermediate_size"], d.ffn());
  EXPECT_EQ(k["tie_word_embeddings"], false);
  expect_same_model(model_config_from_hf(k, "config.json"), d);
}

// Every rope type, the q/k/v biases and the window go out to config.json and come back the
// same; the model_type is the HF architecture that computes it.
TEST(HfFormat, LlamaVariantsAndRopeRoundTrip) {
  std::vector<std::pair<ModelConfig, std::string>> cases;
  ModelConfig c = tiny_llama();
  c.rope_type = RopeType::Linear;
  c.rope_factor = 2.5f;
  cases.push_back({c, "llama"});
  c = tiny_llama();
  c.rope_type = RopeType::Llama3;
  c.rope_theta = 500000.0f;
  c.rope_factor = 8.0f;
  c.rope_low_freq_factor = 1.0f;
  c.rope_high_freq_factor = 4.0f;
  c.rope_original_context = 8192;
  cases.push_back({c, "llama"});
  c = tiny_llama();
  c.rope_type = RopeType::Yarn;
  c.rope_factor = 4.0f;
  c.rope_original_context = 4;
  c.rope_beta_fast = 16.0f;
  c.rope_attention_factor = 1.25f;
  c.rope_mscale = 0.707f;
  c.rope_mscale_all_dim = 1.0f;
  c.rope_truncate = false;
  cases.push_back({c, "llama"});
  c = tiny_llama();
  c.sliding_window = 4;
  cases.push_back({c, "mistral"});
  c = tiny_llama();
  c.qkv_bias = true;
  c.tie_embeddings = true;
  cases.push_back({c, "qwen2"});
  c.sliding_window = 6;  // Qwen2 with every layer sliding
  cases.push_back({c, "qwen2"});
  for (const auto& [cfg, type] : cases) {
    const nlohmann::json j = hf_config_json(cfg);
    EXPECT_EQ(j["model_type"], type) << j.dump();
    const ModelConfig back = model_config_from_hf(j, "config.json");
    expect_same_model(back, cfg);
    EXPECT_EQ(back.rope_type, cfg.rope_type) << j.dump();
    EXPECT_EQ(back.rope_factor, cfg.rope_factor);
    EXPECT_EQ(back.rope_low_freq_factor, cfg.rope_low_freq_factor);
    EXPECT_EQ(back.rope_high_freq_factor, cfg.rope_high_freq_factor);
    EXPECT_EQ(back.rope_original_context > 0 ? back.rope_original_context : back.context_length,
              cfg.rope_original_context > 0 ? cfg.rope_original_context : cfg.context_length);
    EXPECT_EQ(back.rope_beta_fast, cfg.rope_beta_fast);
    EXPECT_EQ(back.rope_beta_slow, cfg.rope_beta_slow);
    EXPECT_EQ(back.rope_attention_factor, cfg.rope_attention_factor);
    EXPECT_EQ(back.rope_mscale, cfg.rope_mscale);
    EXPECT_EQ(back.rope_mscale_all_dim, cfg.rope_mscale_all_dim);
    EXPECT_EQ(back.rope_truncate, cfg.rope_truncate);
    EXPECT_EQ(back.qkv_bias, cfg.qkv_bias);
    EXPECT_EQ(back.sliding_window, cfg.sliding_window) << j.dump();
    // Both layouts carry the type, so transformers 4 (rope_scaling) and 5 read the same.
    if (cfg.rope_type != RopeType::Default) {
      EXPECT_EQ(j["rope_scaling"]["rope_type"], j["rope_parameters"]["rope_type"]);
    }
  }
}

TEST(HfFormat, ConfigErrors) {
  const std::string t5 = message_of([] {
    model_config_from_hf({{"model_type", "t5"}, {"d_model", 512}}, "/m/config.json");
  });
  EXPECT_NE(t5.find("/m/config.json"), std::string::npos) << t5;
  EXPECT_NE(t5.find("model_type \"t5\" is not supported"), std::string::npos) << t5;

  nlohmann::json j = hf_config_json(tiny_llama());
  j.erase("hidden_size");
  const std::string missing = message_of([&] { model_config_from_hf(j, "c.json"); });
  EXPECT_NE(missing.find("c.json: missing key \"hidden_size\""), std::string::npos) << missing;

  nlohmann::json s = hf_config_json(tiny_llama());
  s["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_NE(message_of([&] { model_config_from_hf(s, "c.json"); }).find("rope_scaling"),
            std::string::npos);
  nlohmann::json bad = hf_config_json(tiny_gpt2());
  bad["n_head"] = 3;  // 4 is not a multiple of 3
  EXPECT_NE(message_of([&] { model_config_from_hf(bad, "c.json"); }).find("n_embd"),
            std::string::npos);
  EXPECT_NE(message_of([] {
              model_config_from_hf(nlohmann::json::object(), "c.json");
            }).find("missing \"model_type\""),
            std::string::npos);
}

TEST(HfFormat, Gpt2TransposesAreExactAndRoundTrip) {
  const ModelConfig c = tiny_gpt2();
  const NamedTensors params = make_params(c, 1.0f);
  const NamedTensors hf = to_hf_tensors(c, params);
  ASSERT_EQ(hf.size(), params.size());
  int transposed = 0;
  for (size_t k = 0; k < hf.size(); ++k) {
    const auto& [name, t] = params[k];
    const Tensor& h = hf[k].second;
    EXPECT_EQ(hf[k].first, name);
    if (hf_transposed(c, name)) {
      ++transposed;
      const int64_t rows = t.dim(0), cols = t.dim(1);  // braid (out, in)
      ASSERT_EQ(h.shape(), (Shape{cols, rows})) << name;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t q = 0; q < cols; ++q)
          ASSERT_EQ(h.f32()[q * rows + r], t.f32()[r * cols + q]) << name;
    } else {
      EXPECT_TRUE(h.same_storage(t)) << name;
    }
  }
  EXPECT_EQ(transposed, 4 * c.n_layer);
  EXPECT_EQ(hf[4].first, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(hf[4].second.shape(), (Shape{4, 12}));  // Conv1D (in, out)

  const NamedTensors back = from_hf_tensors(c, hf, "m.safetensors");
  ASSERT_EQ(back.size(), params.size());
  for (size_t k = 0; k < back.size(); ++k) {
    EXPECT_EQ(back[k].first, params[k].first);
    ASSERT_EQ(back[k].second.shape(), params[k].second.shape());
    EXPECT_EQ(std::memcmp(back[k].second.raw(), params[k].second.raw(), params[k].second.nbytes()),
              0)
        << back[k].first;
  }

  // bf16 (2-byte elements) transposes too.
  ModelConfig one = c;
  one.n_layer = 1;
  NamedTensors p16;
  for (auto& [n, t] : make_params(one, 0.0f)) {
    Tensor b = Tensor::empty(t.shape(), DType::BF16);
    for (int64_t i = 0; i < t.numel(); ++i) b.data<bf16>()[i] = float_to_bf16(t.f32()[i]);
    p16.emplace_back(n, b);
  }
  const NamedTensors h16 = to_hf_tensors(one, p16);
  const Tensor& w = p16[4].second;  // c_attn (12, 4)
  EXPECT_EQ(h16[4].second.data<bf16>()[1 * 12 + 5].bits, w.data<bf16>()[5 * 4 + 1].bits);
}

TEST(HfFormat, Gpt2ImportAcceptsHfQuirks) {
  const ModelConfig c = tiny_gpt2();
  const NamedTensors params = make_params(c, 1.0f);
  NamedTensors hf;
  for (auto& [n, t] : to_hf_tensors(c, params))
    hf.emplace_back(n.substr(std::string("transformer.").size()), t);  // as GPT2Model saves
  hf.emplace_back("h.0.attn.bias", Tensor::zeros({1, 1, 5, 5}));
  hf.emplace_back("h.1.attn.masked_bias", Tensor::zeros({}));
  hf.emplace_back("lm_head.weight", params[0].second.clone());  // equal to wte: accepted
  const NamedTensors back = from_hf_tensors(c, hf, "m.safetensors");
  ASSERT_EQ(back.size(), params.size());
  EXPECT_EQ(back[0].first, "transformer.wte.weight");

  hf.back().second.f32()[0] += 1.0f;  // an untied head in a tied config
  const std::string untied = message_of([&] { from_hf_tensors(c, hf, "m.safetensors"); });
  EXPECT_NE(untied.find("lm_head.weight differs"), std::string::npos) << untied;
  hf.pop_back();

  NamedTensors wrong = hf;
  wrong[4].second = Tensor::zeros({12, 4});  // c_attn in braid orientation, not Conv1D's
  const std::string shape = message_of([&] { from_hf_tensors(c, wrong, "m.safetensors"); });
  EXPECT_NE(shape.find("m.safetensors: h.0.attn.c_attn.weight has shape [12, 4]"),
            std::string::npos)
      << shape;

  NamedTensors short_of_one(hf.begin() + 1, hf.end());
  const std::string miss = message_of([&] { from_hf_tensors(c, short_of_one, "m.safetensors"); });
  EXPECT_NE(miss.find("missing tensor transformer.wte.weight"), std::string::npos) << miss;

  NamedTensors extra = hf;
  extra.emplace_back("h.0.attn.q_proj.weight", Tensor::zeros({4, 4}));
  EXPECT_NE(message_of([&] { from_hf_tensors(c, extra, "m.safetensors"); }).find("not a parameter"),
            std::string::npos);
}

TEST(HfFormat, LlamaTensorsPassThrough) {
  const ModelConfig c = tiny_llama();  // untied: lm_head present
  const NamedTensors params = make_params(c, 0.5f);
  EXPECT_EQ(params.back().first, "lm_head.weight");
  const NamedTensors hf = to_hf_tensors(c, params);
  ASSERT_EQ(hf.size(), params.size());
  for (size_t k = 0; k < hf.size(); ++k) EXPECT_TRUE(hf[k].second.same_storage(params[k].second));
  EXPECT_EQ(hf[3].first, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(hf[3].second.shape(), (Shape{4, 8}));  // 2 kv heads * head_dim 2, hidden 8
  NamedTensors with_buffer = hf;
  with_buffer.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", Tensor::zeros({1}));
  const NamedTensors back = from_hf_tensors(c, with_buffer, "m.safetensors");
  ASSERT_EQ(back.size(), params.size());
  for (size_t k = 0; k < back.size(); ++k)
    EXPECT_TRUE(back[k].second.same_storage(params[k].second));

  ModelConfig tied = c;
  tied.tie_embeddings = true;
  NamedTensors tp = make_params(tied, 0.0f);
  EXPECT_EQ(to_hf_tensors(tied, tp).size(), tp.size());
  tp.emplace_back("lm_head.weight", tp[0].second);  // a tied model's head is not written
  EXPECT_EQ(to_hf_tensors(tied, tp).size(), tp.size() - 1);
}

}  // namespace
}  // namespace braid
