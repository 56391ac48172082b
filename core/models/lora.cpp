// LoraLinear forward/backward and the LoRA pass.
#include "core/models/lora.h"

#include <fmt/ranges.h>

#include <cmath>

#include "core/kernels/dropout.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/linear.h"
#include "core/models/quantized_linear.h"
#include "core/random.h"

namespace braid {

namespace {

Parameter& linear_weight_of(Module& m) {
  auto* l = dynamic_cast<Linear*>(&m);
  BRAID_CHECK(l, "LoRA wraps Linear layers; {} is not one", m.path());
  return l->weight;
}

float lora_scale(const LoraConfig& c) {
  const float r = static_cast<float>(c.rank);
  return c.rslora ? c.alpha / std::sqrt(r) : c.alpha / r;
}

}  // namespace

ShardSpec lora_a_shard(const ShardSpec& base) {
  ShardSpec s;
  if (base.sharded() && base.dim == 1) {  // row-parallel: A splits on its inputs too
    s.dim = 1;
    s.parts = base.parts;
  }
  return s;
}

ShardSpec lora_b_shard(const ShardSpec& base) {
  ShardSpec s;
  if (base.sharded() && base.dim == 0) {  // column-parallel: B splits on its outputs
    s.dim = 0;
    s.parts = base.parts;
    s.blocks = base.blocks;  // GPT-2's fused q|k|v rows split per block
  }
  s.replicas = base.replicas;  // B rows of a replicated kv head are replicated with it
  return s;
}

LoraLinear::LoraLinear(std::unique_ptr<Module> base, const LoraConfig& cfg)
    : Module(base->path()),
      lora_A(base->path() + ".lora_A.weight", Tensor()),
      lora_B(base->path() + ".lora_B.weight", Tensor()),
      base_(base.get()),
      scale_(lora_scale(cfg)),
      dropout_(cfg.dropout),
      stream_(hash_string(base->path())) {
  BRAID_CHECK(cfg.rank > 0, "LoRA rank {}", cfg.rank);
  const Parameter& base_weight = linear_weight_of(*base);
  const Tensor& w = base_weight.value;  // (out, in), local to this rank
  const Shape& g = base_weight.global_shape;
  lora_A.shard = lora_a_shard(base_weight.shard);
  lora_B.shard = lora_b_shard(base_weight.shard);
  lora_A.global_shape = {cfg.rank, g[1]};
  lora_B.global_shape = {g[0], cfg.rank};
  lora_A.value =
      w.new_zeros(lora_A.shard.local_shape(lora_A.global_shape), DType::F32, MemCategory::Weights);
  lora_B.value =
      w.new_zeros(lora_B.shard.local_shape(lora_B.global_shape), DType::F32, MemCategory::Weights);
  add_slot("base", std::move(base));
}

void LoraLinear::init(uint64_t seed) {
  // Draw the global A so every layout starts from the same values.
  Tensor full = Tensor::empty(lora_A.global_shape);
  const double bound = 1.0 / std::sqrt(static_cast<double>(lora_A.global_shape[1]));
  const uint64_t stream = hash_string(lora_A.name);
  float* p = full.f32();
  for (int64_t i = 0; i < full.numel(); ++i)
    p[i] = static_cast<float>((2.0 * uniform_at(seed, stream, i) - 1.0) * bound);
  lora_A.value.copy_from(lora_A.shard.sharded() ? extract_shard(full, lora_A.shard, tp_part_)
                                                : full);
  lora_B.value.zero_();
}

namespace {
QuantCode quant_code_of(BaseQuant kind) {
  return kind == BaseQuant::Nf4 ? QuantCode::Nf4 : QuantCode::Int8;
}
}  // namespace

void LoraLinear::quantize_base(ExecContext& ctx, BaseQuant kind, int64_t block, bool double_quant) {
  if (kind == BaseQuant::None) return;
  auto* linear = dynamic_cast<Linear*>(base_);
  BRAID_CHECK(linear, "{}: the base is already quantised", path());
  const QuantCode code = quant_code_of(kind);
  Module* quantized = nullptr;
  replace([&](const Module& m) { return &m == base_; },
          [&](std::unique_ptr<Module> old) -> std::unique_ptr<Module> {
            auto q = std::make_unique<QuantizedLinear>(ctx, dynamic_cast<Linear&>(*old), code,
                                                       block, double_quant);
            quantized = q.get();
            return q;  // `old` (and its full-precision weight) is destroyed here
          });
  BRAID_CHECK(quantized, "{}: no base to quantise", path());
  base_ = quantized;
}

void LoraLinear::place(int part, std::unique_ptr<Module> rank_region,
                       std::unique_ptr<Module> weight_grad_region) {
  tp_part_ = part;
  if (rank_region) {
    BRAID_CHECK(!rank_region_, "{}: already placed", path());
    rank_region_ = &child(add_slot("rank_region", std::move(rank_region)));
  }
  if (weight_grad_region) {
    BRAID_CHECK(!weight_grad_region_, "{}: already placed", path());
    weight_grad_region_ = &child(add_slot("weight_grad_region", std::move(weight_grad_region)));
  }
}

void LoraLinear::own_parameters(std::vector<Parameter*>& out) {
  out.push_back(&lora_A);
  out.push_back(&lora_B);
}

DropoutWindow LoraLinear::window() const {
  if (!lora_A.shard.sharded()) return {};
  // A row-parallel base: x holds this rank's input columns; draw the whole input's mask there.
  const int64_t local = lora_A.value.dim(1);
  return {lora_A.global_shape[1], static_cast<int64_t>(tp_part_) * local};
}

Tensor LoraLinear::dropped(ExecContext& ctx, const Tensor& x, uint64_t seed) const {
  if (dropout_ <= 0.0f || seed == 0) return x;
  Tensor xd = empty_like(x);
  dropout_apply(ctx, xd, x, dropout_, seed, stream_, window());
  return xd;
}

// The dtype the adapter's low-rank activations take into their GEMMs: the adapter weights'
// 16-bit dtype when the activations have it too (bf16/fp16 training), so that every adapter
// GEMM has operands of one dtype and runs as it is (the native bf16 GEMM, tensor cores);
// f32 otherwise. Their arithmetic before that rounding (A's product, the group sum of a split
// A, the scale) is f32, and y and dx take the adapter's f32 contribution with one rounding.
DType LoraLinear::low_rank_dtype(const Tensor& x) const {
  const DType a = lora_A.value.dtype();
  return a != DType::F32 && a == x.dtype() ? a : DType::F32;
}

Tensor LoraLinear::add_update(ExecContext& ctx, Tensor& y, const Tensor& xd, MicroBatch* mb,
                              InferState* st) const {
  const int64_t r = lora_A.value.dim(0);
  Tensor t = xd.new_empty(with_last(xd.shape(), r), DType::F32);  // (..., r)
  Tensor t_rows = as_rows(t);
  linear_forward(ctx, t_rows, as_rows(xd), lora_A.value, Tensor());
  if (rank_region_) t = mb ? rank_region_->forward(t, *mb) : rank_region_->infer(t, *st);
  Tensor t2 = as_rows(t);
  scale_inplace(ctx, t2, scale_);
  t = rounded(ctx, t, low_rank_dtype(xd));
  Tensor y2 = as_rows(y);
  linear_forward(ctx, y2, as_rows(t), lora_B.value, Tensor(), /*accumulate=*/true);
  return t;
}

Tensor LoraLinear::forward(const Tensor& x, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  Tensor y = base_->forward(x, mb);  // base keeps x (frozen: only for its input gradient)
  Tensor t = add_update(ctx, y, dropped(ctx, x, mb.dropout_seed), &mb, nullptr);
  mb.push(x);  // the dropout mask is redrawn from the seed in backward
  mb.push(t);
  return y;
}

Tensor LoraLinear::infer(const Tensor& x, InferState& st) {
  Tensor y = base_->infer(x, st);
  add_update(st.ctx, y, x, nullptr, &st);
  return y;
}

Tensor LoraLinear::backward(const Tensor& dy, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  Tensor t = mb.pop(), x = mb.pop();
  const DType low = t.dtype();  // the forward's low_rank_dtype
  const Tensor dy2 = as_rows(dy), t2 = as_rows(t);
  // dt = s * dy B (N, r) in f32: the path back to A and x.
  Tensor dt = t.new_empty(t.shape(), DType::F32);
  Tensor dt_rows = as_rows(dt);
  linear_backward_input(ctx, dt_rows, dy2, lora_B.value);
  scale_inplace(ctx, dt_rows, scale_);
  if (rank_region_) dt = rank_region_->backward(dt, mb);  // every position, as x has
  Tensor dx = base_->backward(dy, mb);
  // dx += dropout(dt A), summed in f32 and rounded once: the GEMM adds onto dx itself, or with
  // dropout (the forward's mask, redrawn from the seed) its f32 product goes through the mask
  // first.
  Tensor dt_low = rounded(ctx, dt, low);
  Tensor dx2 = as_rows(dx);
  if (dropout_ > 0.0f && mb.dropout_seed != 0) {
    Tensor dxd = dx.new_empty(dx.shape(), DType::F32);
    Tensor dxd2 = as_rows(dxd);
    linear_backward_input(ctx, dxd2, as_rows(dt_low), lora_A.value);
    dropout_apply(ctx, dxd, dxd, dropout_, mb.dropout_seed, stream_, window());
    add_inplace(ctx, dx, dxd);
  } else {
    linear_backward_input(ctx, dx2, as_rows(dt_low), lora_A.value, /*accumulate=*/true);
  }
  if (weight_grad_region_) dt_low = rounded(ctx, weight_grad_region_->backward(dt, mb), low);
  const Tensor dt2 = as_rows(dt_low);
  // Weight gradients: dB += dy^T t, dA += dt^T dropout(x).
  auto work = [this, &ctx, dy2, t2, dt2, x, seed = mb.dropout_seed] {
    Tensor none;
    Tensor dB = lora_B.grad(), dA = lora_A.grad();
    linear_backward_weight(ctx, dB, none, dy2, t2);
    linear_backward_weight(ctx, dA, none, dt2, as_rows(dropped(ctx, x, seed)));
  };
  std::vector<Parameter*> ready = {&lora_B, &lora_A};  // reverse order of use
  if (mb.defer_weight_grads()) {
    mb.defer(std::move(work), std::move(ready));
  } else {
    work();
    for (Parameter* p : ready) mb.grad_ready(*p);
  }
  return dx;
}

bool lora_targets(const std::string& path, const std::vector<std::string>& targets) {
  const std::string name = path.substr(path.rfind('.') + 1);
  for (const std::string& t : targets) {
    if (t == "all-linear") return true;
    if (t == name) return true;            // c_attn, c_proj, c_fc
    if (t + "_proj" == name) return true;  // q k v o up down gate
  }
  return false;
}

int apply_lora(Transformer& model, const LoraConfig& cfg, uint64_t seed) {
  std::vector<LoraLinear*> wrapped;
  const std::vector<std::string> targets = cfg.effective_targets(model.config().is_llama());
  const int n = model.replace(
      [&](const Module& m) { return is_linear(m) && lora_targets(m.path(), targets); },
      [&](std::unique_ptr<Module> m) {
        auto l = std::make_unique<LoraLinear>(std::move(m), cfg);
        wrapped.push_back(l.get());
        return l;
      });
  BRAID_USER_CHECK(
      n > 0, "lora.targets [{}] match no Linear of this {} model; expected {} or all-linear",
      fmt::join(targets, ", "), model.config().family,
      model.config().is_llama() ? "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"
                                : "c_attn, c_proj, c_fc");
  for (Parameter* p : model.parameters()) p->freeze();  // the base, before the adapters exist
  model.refresh_parameters();
  for (LoraLinear* l : wrapped) l->init(seed);
  return n;
}

int quantize_lora_bases(ExecContext& ctx, Transformer& model, const LoraConfig& cfg) {
  if (cfg.base_quant == BaseQuant::None) return 0;
  int n = 0;
  model.visit([&](Module& m) {
    if (auto* l = dynamic_cast<LoraLinear*>(&m)) {
      l->quantize_base(ctx, cfg.base_quant, cfg.quant_block_size, cfg.double_quant);
      ++n;
    }
  });
  model.refresh_parameters();
  return n;
}

QuantizedBaseBytes quantized_base_bytes(Transformer& model) {
  QuantizedBaseBytes b;
  model.visit([&](Module& m) {
    auto* l = dynamic_cast<LoraLinear*>(&m);
    auto* q = l ? dynamic_cast<QuantizedLinear*>(&l->base()) : nullptr;
    if (!q) return;
    const int64_t codes = static_cast<int64_t>(q->weight.q.nbytes());
    b.codes += codes;
    b.constants += q->weight.bytes() - codes;
    b.weights += q->weight.numel();
    ++b.linears;
  });
  return b;
}

Tensor quantized_base_readback(ExecContext& ctx, const Tensor& w, const LoraConfig& cfg) {
  BRAID_CHECK(cfg.base_quant != BaseQuant::None, "quantized_base_readback: lora.base_quant none");
  const QuantizedWeight qw = quantize_weight(ctx, w, quant_code_of(cfg.base_quant),
                                             cfg.quant_block_size, cfg.double_quant);
  Tensor out = ctx.zeros(w.shape(), DType::F32, MemCategory::Weights);
  dequantize_weight(ctx, out, qw);
  return out;
}

}  // namespace braid
