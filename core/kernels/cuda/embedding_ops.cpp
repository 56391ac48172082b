// CUDA token + position embedding (core/kernels/embedding.h) on the context's stream: the CPU
// kernels' checks, then embedding.cu's launchers. A token outside the vocabulary throws as on
// the CPU; finding one needs the token ids, which live on the device, so those ops wait for a
// small check kernel (one stream synchronisation per call).
#include <limits>
#include <utility>

#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/embedding.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/profile.h"

namespace braid::cuda {

namespace {

const int32_t* token_ptr(const Tensor& tokens) { return static_cast<const int32_t*>(tokens.raw()); }

void check_tokens_tensor(const Tensor& tokens, const char* op, const char* what) {
  check_dtype(tokens, DType::I32, what);
  BRAID_CHECK(tokens.ndim() == 2, "{}: tokens must be (B, T), got {}", op, tokens.str());
}

// Throws the CPU's message for the first token outside [0, vocab), if any. `vocab_name` is how
// the message names the bound ("V=" for the whole table, "" for a sharded vocabulary).
void check_token_range(ExecContext& ctx, const Tensor& tokens, int64_t vocab, const char* op,
                       const char* vocab_name) {
  const int64_t N = tokens.numel(), T = tokens.dim(1);
  if (N == 0) return;
  Tensor flag = ctx.empty({2}, DType::I32, MemCategory::Workspace);  // one u64: first bad position
  auto* bad = static_cast<unsigned long long*>(flag.raw());
  void* s = stream_of(ctx);
  CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), static_cast<cudaStream_t>(s)));
  launch_check_tokens(s, bad, token_ptr(tokens), N, vocab);
  check_launch(op);
  unsigned long long first = 0;
  CUDA_CHECK(cudaMemcpyAsync(&first, bad, sizeof(first), cudaMemcpyDeviceToHost,
                             static_cast<cudaStream_t>(s)));
  ctx.stream().synchronize();
  if (first == std::numeric_limits<unsigned long long>::max()) return;
  const auto i = static_cast<int64_t>(first);
  int32_t tok = 0;
  CUDA_CHECK(cudaMemcpyAsync(&tok, token_ptr(tokens) + i, sizeof(tok), cudaMemcpyDeviceToHost,
                             static_cast<cudaStream_t>(s)));
  ctx.stream().synchronize();
  throw Error(fmt::format("{}: token id {} at (b={}, t={}) is outside the vocabulary [0, {}{})", op,
                          tok, i / T, i % T, vocab_name, vocab));
}

void check_positions(const Tensor& wpe, int64_t C, int64_t pos_offset, int64_t T, const char* op) {
  BRAID_CHECK(wpe.ndim() == 2 && wpe.dim(1) == C, "{}: wpe must be (P, {}), got {}", op, C,
              wpe.str());
  const int64_t P = wpe.dim(0);
  BRAID_CHECK(pos_offset >= 0 && (T == 0 || pos_offset + T <= P),
              "{}: positions [{}, {}) are outside the position table [0, {})", op, pos_offset,
              pos_offset + T, P);
}

}  // namespace

void embedding_forward(ExecContext& ctx, Tensor& out, const Tensor& tokens, const Tensor& wte,
                       const Tensor& wpe, int64_t pos_offset) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "embedding_forward";
  check_float(out, op, "out");
  check_float(wte, op, "wte");
  if (wpe.defined()) check_float(wpe, op, "wpe");
  check_tokens_tensor(tokens, op, "embedding_forward tokens");
  BRAID_CHECK(wte.ndim() == 2, "{}: wte must be (V, C), got {}", op, wte.str());
  const int64_t B = tokens.dim(0), T = tokens.dim(1), V = wte.dim(0), C = wte.dim(1);
  check_shape(out, {B, T, C}, "embedding_forward out");
  if (wpe.defined()) check_positions(wpe, C, pos_offset, T, op);
  check_token_range(ctx, tokens, V, op, "V=");
  launch_embedding_forward(stream_of(ctx), out.raw(), code(out), token_ptr(tokens), wte.raw(),
                           code(wte), V, 0, wpe.defined() ? wpe.raw() : nullptr,
                           wpe.defined() ? code(wpe) : 0, pos_offset, B * T, T, C);
  check_launch(op);
}

void embedding_backward(ExecContext& ctx, Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                        const Tensor& tokens, int64_t pos_offset) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "embedding_backward";
  if (dwte.defined()) check_float(dwte, op, "dwte");
  if (dwpe.defined()) check_float(dwpe, op, "dwpe");
  check_float(dout, op, "dout");
  check_tokens_tensor(tokens, op, "embedding_backward tokens");
  BRAID_CHECK(dout.ndim() == 3, "{}: dout must be (B, T, C), got {}", op, dout.str());
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = dout.dim(2), N = B * T;
  check_shape(dout, {B, T, C}, "embedding_backward dout");
  if (dwte.defined())
    BRAID_CHECK(dwte.ndim() == 2 && dwte.dim(1) == C, "{}: dwte must be (V, {}), got {}", op, C,
                dwte.str());
  void* s = stream_of(ctx);
  if (dwpe.defined()) {
    BRAID_CHECK(dwpe.ndim() == 2 && dwpe.dim(1) == C, "{}: dwpe must be (P, {}), got {}", op, C,
                dwpe.str());
    const int64_t P = dwpe.dim(0);
    BRAID_CHECK(pos_offset >= 0 && (T == 0 || pos_offset + T <= P),
                "{}: positions [{}, {}) are outside the position table [0, {})", op, pos_offset,
                pos_offset + T, P);
    launch_embedding_position_grad(s, dwpe.raw(), code(dwpe), dout.raw(), code(dout), B, T, C,
                                   pos_offset);
    check_launch(op);
  }
  if (!dwte.defined()) return;  // a frozen token table: no scatter at all
  const int64_t V = dwte.dim(0);
  BRAID_CHECK(N < (int64_t{1} << 31), "{}: {} positions do not fit the kernel's 31-bit index", op,
              N);
  check_token_range(ctx, tokens, V, op, "V=");
  launch_embedding_table_grad(s, dwte.raw(), code(dwte), V, 0, dout.raw(), code(dout),
                              token_ptr(tokens), N, C);
  check_launch(op);
}

// The partial lookup of a table holding vocabulary rows [row_begin, row_begin + R): out is the
// f32 partial sum whatever the table's storage.
void embedding_rows_forward(ExecContext& ctx, Tensor& out, const Tensor& tokens, const Tensor& wte,
                            const Tensor& wpe, int64_t row_begin, int64_t vocab,
                            int64_t pos_offset) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "embedding_rows_forward";
  BRAID_CHECK(out.defined() && out.dtype() == DType::F32, "{}: out is {}; expected f32 here", op,
              out.str());
  check_float(wte, op, "wte");
  if (wpe.defined()) check_float(wpe, op, "wpe");
  check_tokens_tensor(tokens, op, "embedding_rows_forward tokens");
  BRAID_CHECK(wte.ndim() == 2, "{}: wte must be (R, C), got {}", op, wte.str());
  const int64_t B = tokens.dim(0), T = tokens.dim(1), rows = wte.dim(0), C = wte.dim(1);
  check_shape(out, {B, T, C}, "embedding_rows_forward out");
  if (wpe.defined()) check_positions(wpe, C, pos_offset, T, op);
  check_token_range(ctx, tokens, vocab, op, "");
  launch_embedding_forward(stream_of(ctx), out.raw(), code(out), token_ptr(tokens), wte.raw(),
                           code(wte), rows, row_begin, wpe.defined() ? wpe.raw() : nullptr,
                           wpe.defined() ? code(wpe) : 0, pos_offset, B * T, T, C);
  check_launch(op);
}

// Tokens this table does not hold are skipped (no range check, as on the CPU).
void embedding_rows_backward(ExecContext& ctx, Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                             const Tensor& tokens, int64_t row_begin) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "embedding_rows_backward";
  if (!dwte.defined() && !dwpe.defined()) return;  // frozen tables: nothing to do
  check_float(dout, op, "dout");
  for (auto [t, name] : {std::pair{&dwte, "dwte"}, {&dwpe, "dwpe"}})
    if (t->defined())
      BRAID_CHECK(t->dtype() == DType::F32, "{}: {} is {}; expected f32 here", op, name, t->str());
  check_dtype(tokens, DType::I32, "embedding_rows_backward tokens");
  BRAID_CHECK(tokens.ndim() == 2 && dout.ndim() == 3,
              "{}: tokens (B, T) and dout (B, T, C), got {} and {}", op, tokens.str(), dout.str());
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = dout.dim(2), N = B * T;
  check_shape(dout, {B, T, C}, "embedding_rows_backward dout");
  void* s = stream_of(ctx);
  if (dwte.defined()) {
    BRAID_CHECK(dwte.ndim() == 2 && dwte.dim(1) == C, "{}: dwte must be (R, {}), got {}", op, C,
                dwte.str());
    BRAID_CHECK(N < (int64_t{1} << 31), "{}: {} positions do not fit the kernel's 31-bit index", op,
                N);
    launch_embedding_table_grad(s, dwte.raw(), code(dwte), dwte.dim(0), row_begin, dout.raw(),
                                code(dout), token_ptr(tokens), N, C);
  }
  if (dwpe.defined()) {
    BRAID_CHECK(dwpe.ndim() == 2 && dwpe.dim(1) == C && T <= dwpe.dim(0),
                "{}: dwpe must be (P >= {}, {}), got {}", op, T, C, dwpe.str());
    launch_embedding_position_grad(s, dwpe.raw(), code(dwpe), dout.raw(), code(dout), B, T, C, 0);
  }
  check_launch(op);
}

}  // namespace braid::cuda
