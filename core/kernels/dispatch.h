// The device check every public kernel runs, and the one place it picks an implementation.
//
// KernelArgs checks that each defined tensor argument lives on the context's device (a host
// tensor handed to a CUDA context, or the reverse, fails naming the argument). Then
// BRAID_DISPATCH(args, op, ...) calls cpu::op or cuda::op (core/kernels/cpu/cpu_kernels.h,
// core/kernels/cuda/cuda_kernels.h) with the same arguments. A binary built without the CUDA
// backend cannot make a CUDA context, and its dispatch says so if it is reached anyway.
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
  bool on_cpu() const { return ctx_.device().is_cpu(); }
  const char* op() const { return op_; }
  // The CUDA branch of a binary without the backend.
  template <typename R>
  [[noreturn]] R cuda_absent() const {
    throw UserError(fmt::format("{} on {}: this braid binary was built without the CUDA backend",
                                op_, ctx_.device().str()));
  }

 private:
  void check(const Tensor& t, const char* name) const {
    if (!t.defined()) return;  // optional arguments (bias, frozen gradients) may be absent
    BRAID_CHECK(t.device() == ctx_.device(), "{}: {} is on {} but the context runs on {}", op_,
                name, t.device().str(), ctx_.device().str());
  }
  ExecContext& ctx_;
  const char* op_;
};

}  // namespace braid

#if BRAID_WITH_CUDA
#define BRAID_DISPATCH(args, fn, ...) \
  ((args).on_cpu() ? ::braid::cpu::fn(__VA_ARGS__) : ::braid::cuda::fn(__VA_ARGS__))
#else
#define BRAID_DISPATCH(args, fn, ...)              \
  ((args).on_cpu() ? ::braid::cpu::fn(__VA_ARGS__) \
                   : (args).cuda_absent<decltype(::braid::cpu::fn(__VA_ARGS__))>())
#endif
