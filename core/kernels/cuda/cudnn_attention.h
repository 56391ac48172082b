// Attention through cuDNN's fused flash SDPA (the cuDNN frontend's graph API), forward and
// backward, causal, grouped-query, bf16/fp16 with f32 statistics. Plain C++: the frontend's
// headers stay in one translation unit (core/kernels/cuda/cudnn/attention_cudnn.cpp), compiled
// when the build finds them (the build has the frontend); libcudnn is opened at run time, so a
// binary without it, or a machine without it, runs braid's own kernel instead.
//
// Each call returns false when cuDNN does not take the case (no cuDNN, f32, a sliding window,
// mixed dtypes, misaligned pointers, a shape cuDNN's support check refuses, or the context's
// switch is off): the caller then runs braid's flash-style kernel, whose results agree to
// rounding (same contract: core/kernels/attention.h; lse is the natural log-sum-exp of the
// scaled scores on both). Graphs are built once per shape and kept per context.
#pragma once

#include <string>

#include "core/context.h"

namespace braid::cuda {

bool cudnn_attention_forward(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& q,
                             const Tensor& k, const Tensor& v, int64_t window);
bool cudnn_attention_backward(ExecContext& ctx, Tensor& dq, Tensor& dk, Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse, int64_t window);

// Whether this context may use cuDNN's attention (default: yes, unless the environment sets
// BRAID_CUDNN_ATTENTION=0). Tests turn it off to run braid's kernel on the same inputs.
void set_cudnn_attention(ExecContext& ctx, bool enabled);

// "cuDNN 9.19.0 (frontend 1.32.0)" when the binary has the frontend and libcudnn loads, else
// why not ("built without the cuDNN frontend", "libcudnn.so.9 not found: ...").
std::string cudnn_status();
// The number of (shape, direction) graphs cuDNN took and ran on this context; tests use it to
// see which path ran.
int64_t cudnn_attention_calls(ExecContext& ctx);

}  // namespace braid::cuda
