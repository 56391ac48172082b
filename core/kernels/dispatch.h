// The device check every public kernel runs before dispatching to an implementation.
//
// Each defined tensor argument must live on the context's device (a host tensor handed to a
// CUDA context, or the reverse, fails naming the argument); then the kernel runs the
// implementation for that device. Only the CPU has implementations so far: a CUDA context or
// tensor fails with "no CUDA kernel for <op> yet" instead of reaching a host loop.
#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include "core/context.h"

namespace braid {

class KernelArgs {
 public:
  using Arg = std::pair<const Tensor*, const char*>;
  KernelArgs(ExecContext& ctx, const char* op, std::initializer_list<Arg> args)
      : ctx_(ctx), op_(op) {
    for (const Arg& a : args) check(*a.first, a.second);
  }
  template <typename T>
  void add_all(const std::vector<T*>& tensors, const char* name) {
    for (const Tensor* t : tensors) check(*t, name);
  }
  // Throws unless the context (and so every argument) is on the host.
  void require_cpu() const {
    BRAID_CHECK(ctx_.device().is_cpu(), "no {} kernel for {} yet ({} context)",
                device_kind_name(ctx_.device()), op_, ctx_.device().str());
  }

 private:
  static const char* device_kind_name(Device d) { return d.is_cpu() ? "CPU" : "CUDA"; }
  void check(const Tensor& t, const char* name) const {
    if (!t.defined()) return;  // optional arguments (bias, frozen gradients) may be absent
    BRAID_CHECK(t.device() == ctx_.device(), "{}: {} is on {} but the context runs on {}{}", op_,
                name, t.device().str(), ctx_.device().str(),
                t.device().is_cpu() ? "" : fmt::format("; no CUDA kernel for {} yet", op_));
  }
  ExecContext& ctx_;
  const char* op_;
};

}  // namespace braid
