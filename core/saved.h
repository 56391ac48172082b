// Saved: the activations one micro-batch's forward keeps for its backward.
//
// A LIFO stack: each layer pushes what its backward needs, in forward order, and its backward
// pops in reverse. Because layers nest in the same order both ways, no layer needs to know
// which others exist, and wrappers (activation checkpointing, LoRA) can intercept a subtree.
// A pipeline keeps one Saved per in-flight micro-batch.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace braid {

class Saved {
 public:
  void push(Tensor t) { stack_.push_back(std::move(t)); }
  Tensor pop() {
    BRAID_CHECK(!stack_.empty(), "Saved::pop on an empty stash (forward/backward mismatch)");
    Tensor t = std::move(stack_.back());
    stack_.pop_back();
    return t;
  }
  bool empty() const { return stack_.empty(); }
  size_t size() const { return stack_.size(); }
  void clear() { stack_.clear(); }

 private:
  std::vector<Tensor> stack_;
};

}  // namespace braid
