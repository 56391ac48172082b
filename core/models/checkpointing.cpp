// Activation checkpointing wrappers and the pass that installs them.
#include "core/models/checkpointing.h"

#include <vector>

#include "core/models/block.h"

namespace braid {

// ---- full: recompute the whole block ----

Recompute::Recompute(std::unique_ptr<Module> inner) : Module(inner->path()) {
  add_slot("recomputed", std::move(inner));
}

Tensor Recompute::forward(const Tensor& x, MicroBatch& mb) {
  MicroBatch scratch(mb.ctx());  // its stash dies here: only x stays on mb
  scratch.dropout_seed = mb.dropout_seed;
  scratch.sample_starts = mb.sample_starts;
  Tensor y = inner().forward(x, scratch);
  mb.push(x);
  return y;
}

Tensor Recompute::backward(const Tensor& dy, MicroBatch& mb) {
  Tensor x = mb.pop();
  MicroBatch rec(mb.ctx(), mb.defer_weight_grads());
  rec.dropout_seed = mb.dropout_seed;
  rec.sample_starts = mb.sample_starts;
  rec.on_grad_ready = mb.on_grad_ready;  // DP buckets hear of each gradient as usual
  inner().forward(x, rec);
  Tensor dx = inner().backward(dy, rec);
  BRAID_CHECK(rec.stash_size() == 0, "{}: {} saved tensors left after the recomputed backward",
              path(), rec.stash_size());
  mb.adopt_deferred(rec);  // zero-bubble schedules run them with mb's other weight GEMMs
  return dx;
}

Tensor Recompute::infer(const Tensor& x, InferState& st) { return inner().infer(x, st); }

// ---- selective: rebuild cheap outputs instead of stashing them ----

RecomputeOutput::RecomputeOutput(std::unique_ptr<Module> inner) : Module(inner->path()) {
  add_slot("recomputed", std::move(inner));
}

Tensor RecomputeOutput::forward(const Tensor& x, MicroBatch& mb) {
  Tensor y = inner().forward(x, mb);  // inner keeps x for its own backward
  Module* m = &inner();
  ExecContext* ctx = &mb.ctx();
  mb.recompute_later(y, [m, ctx, x] {
    InferState st{*ctx};
    return m->infer(x, st);
  });
  return y;
}

Tensor RecomputeOutput::backward(const Tensor& dy, MicroBatch& mb) {
  return inner().backward(dy, mb);
}

Tensor RecomputeOutput::infer(const Tensor& x, InferState& st) { return inner().infer(x, st); }

namespace {
ActivationFn& as_activation(Module& m) {
  auto* a = dynamic_cast<ActivationFn*>(&m);
  BRAID_CHECK(a, "{} is not an activation function", m.path());
  return *a;
}
}  // namespace

RecomputeActivation::RecomputeActivation(std::unique_ptr<Module> inner)
    : ActivationFn(inner->path()), inner_(as_activation(*inner)) {
  inner_.set_keeps_inputs(true);  // apply() runs again on the inputs in the backward
  add_slot("recomputed", std::move(inner));
}

Tensor RecomputeActivation::apply(ExecContext& ctx, const Tensor& a, const Tensor& b) {
  return inner_.apply(ctx, a, b);
}

Tensor RecomputeActivation::forward2(const Tensor& a, const Tensor& b, MicroBatch& mb) {
  Tensor y = inner_.forward2(a, b, mb);  // inner keeps a (and b) for its backward
  ActivationFn* f = &inner_;
  ExecContext* ctx = &mb.ctx();
  mb.recompute_later(y, [f, ctx, a, b] { return f->apply(*ctx, a, b); });
  return y;
}

Tensor RecomputeActivation::backward2(const Tensor& dy, MicroBatch& mb, Tensor* db) {
  return inner_.backward2(dy, mb, db);
}

// ---- the pass ----

namespace {

bool is_norm(const Module& m) {
  return dynamic_cast<const LayerNorm*>(&m) || dynamic_cast<const RMSNorm*>(&m);
}

int layer_of(const Module& block) {
  const std::string& p = block.path();
  return std::stoi(p.substr(p.rfind('.') + 1));
}

}  // namespace

int apply_checkpointing(Transformer& model, Checkpointing mode, int every_n_layers) {
  BRAID_CHECK(every_n_layers >= 1, "checkpoint_every_n_layers is {}; expected >= 1",
              every_n_layers);
  int n = 0;
  if (mode == Checkpointing::None) return 0;
  if (mode == Checkpointing::Full) {
    n = model.replace(
        [&](const Module& m) {
          return dynamic_cast<const Block*>(&m) && layer_of(m) % every_n_layers == 0;
        },
        [](std::unique_ptr<Module> m) { return std::make_unique<Recompute>(std::move(m)); });
  } else if (mode == Checkpointing::Selective) {
    // Inside blocks only: the final norm feeds the fused LM head, which stashes nothing.
    std::vector<Module*> blocks;
    model.visit([&](Module& m) {
      if (dynamic_cast<Block*>(&m)) blocks.push_back(&m);
    });
    for (Module* b : blocks) {
      n += b->replace(is_norm, [](std::unique_ptr<Module> m) {
        return std::make_unique<RecomputeOutput>(std::move(m));
      });
      n += b->replace(
          [](const Module& m) { return dynamic_cast<const ActivationFn*>(&m) != nullptr; },
          [](std::unique_ptr<Module> m) {
            return std::make_unique<RecomputeActivation>(std::move(m));
          });
    }
  } else {
    BRAID_CHECK(false, "checkpointing mode {}; expected none, full or selective",
                static_cast<int>(mode));
  }
  model.refresh_parameters();
  return n;
}

}  // namespace braid
