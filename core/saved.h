// Saved: the activations one micro-batch's forward keeps for its backward.
//
// A LIFO stack: each layer pushes what its backward needs, in forward order, and its backward
// pops in reverse. Because layers nest in the same order both ways, no layer needs to know
// which others exist, and wrappers (activation checkpointing, LoRA) can intercept a subtree.
// A pipeline keeps one Saved per in-flight micro-batch.
//
// An entry may be a recipe instead of a tensor (selective recomputation): pop() rebuilds it.
// One recipe pushed by several layers (a norm's output stashed by the q, k and v projections)
// is rebuilt once, at its first pop, and released at its last.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace braid {

// A tensor that is rebuilt when popped instead of kept.
struct Recipe {
  std::function<Tensor()> rebuild;
  Tensor rebuilt;   // between the first and the last pop
  int pending = 0;  // entries on the stack that still refer to it
};

class Saved {
 public:
  void push(Tensor t) { stack_.push_back({std::move(t), nullptr}); }
  void push_recipe(std::shared_ptr<Recipe> r) {
    ++r->pending;
    stack_.push_back({Tensor(), std::move(r)});
  }
  Tensor pop() {
    BRAID_CHECK(!stack_.empty(), "Saved::pop on an empty stash (forward/backward mismatch)");
    Entry e = std::move(stack_.back());
    stack_.pop_back();
    if (!e.recipe) return e.tensor;
    Recipe& r = *e.recipe;
    if (!r.rebuilt.defined()) r.rebuilt = r.rebuild();
    Tensor t = r.rebuilt;
    if (--r.pending == 0) r.rebuilt = Tensor();
    return t;
  }
  bool empty() const { return stack_.empty(); }
  size_t size() const { return stack_.size(); }
  void clear() { stack_.clear(); }

 private:
  struct Entry {
    Tensor tensor;
    std::shared_ptr<Recipe> recipe;  // non-null: rebuilt on pop
  };
  std::vector<Entry> stack_;
};

}  // namespace braid
