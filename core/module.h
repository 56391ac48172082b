// Module: the contract every layer, block and model follows, and named child slots.
//
// forward(x, mb) keeps on the micro-batch what backward(dy, mb) needs; infer(x, st) runs the
// same computation without keeping anything (evaluation, KV-cache decoding). Children live in
// named slots; every module knows its HF path (`model.layers.3.self_attn.q_proj`), so a pass
// can find any module by path and replace it (tensor-parallel linears, LoRA, activation
// checkpointing) without the model code knowing. A wrapper takes over its inner module's path.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/micro_batch.h"
#include "core/parameter.h"

namespace braid {

class Module {
 public:
  explicit Module(std::string path) : path_(std::move(path)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // y = f(x); pushes onto mb whatever backward needs.
  virtual Tensor forward(const Tensor& x, MicroBatch& mb) = 0;
  // dx from dy; pops what forward pushed; parameter gradients accumulate (+=) and each
  // trainable parameter is reported to mb.grad_ready once its gradient is final.
  virtual Tensor backward(const Tensor& dy, MicroBatch& mb) = 0;
  // forward without keeping anything; st carries the KV cache and position when decoding.
  virtual Tensor infer(const Tensor& x, InferState& st) = 0;

  const std::string& path() const { return path_; }
  // This module's own parameters (not its children's), in order of use.
  virtual void own_parameters(std::vector<Parameter*>& out) { (void)out; }
  // Own parameters, then each child's in slot order: the order of use in forward.
  void collect_parameters(std::vector<Parameter*>& out);

  // Children.
  size_t num_slots() const { return slots_.size(); }
  const std::string& slot_name(size_t i) const { return slots_[i].name; }
  Module& child(size_t i) const { return *slots_[i].module; }
  // The first module at `path` in this subtree (this one included), or null.
  Module* find(std::string_view path);
  // Every module of the subtree (pre-order, this one first).
  void visit(const std::function<void(Module&)>& fn);

  // A pass: for every slot below this module (pre-order) whose module satisfies `match`,
  // replaces it with `wrap(old)`; the replacement is not descended into. Returns how many.
  using Wrap = std::function<std::unique_ptr<Module>(std::unique_ptr<Module>)>;
  int replace(const std::function<bool(const Module&)>& match, const Wrap& wrap);

 protected:
  // Registers a child in a new slot; returns its index.
  size_t add_slot(std::string name, std::unique_ptr<Module> m);
  // Removes the slot named `name` and returns its module (null when there is none).
  std::unique_ptr<Module> take_slot(const std::string& name);

 private:
  struct Slot {
    std::string name;
    std::unique_ptr<Module> module;
  };
  std::string path_;
  std::vector<Slot> slots_;
};

}  // namespace braid
