// CPU token + learned position embedding: gather forward, deterministic scatter-add backward.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/lowp.h"
#include "core/profile.h"

namespace braid {

namespace cpu {

void embedding_forward(ExecContext& ctx, Tensor& out, const Tensor& tokens, const Tensor& wte,
                       const Tensor& wpe, int64_t pos_offset) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "embedding_forward";
  cpu::check_float_args(op, {{&wte, "wte"}, {&out, "out"}});
  if (wpe.defined()) {
    cpu::check_cpu(wpe, op, "wpe");
    cpu::check_float_storage(wpe, op, "wpe");
  }
  cpu::check_cpu(tokens, op, "tokens");
  check_dtype(tokens, DType::I32, "embedding_forward tokens");
  BRAID_CHECK(tokens.ndim() == 2, "{}: tokens must be (B, T), got {}", op, tokens.str());
  BRAID_CHECK(wte.ndim() == 2, "{}: wte must be (V, C), got {}", op, wte.str());
  const int64_t B = tokens.dim(0), T = tokens.dim(1), V = wte.dim(0), C = wte.dim(1);
  check_shape(out, {B, T, C}, "embedding_forward out");
  if (wpe.defined()) {
    BRAID_CHECK(wpe.ndim() == 2 && wpe.dim(1) == C, "{}: wpe must be (P, {}), got {}", op, C,
                wpe.str());
    const int64_t P = wpe.dim(0);
    BRAID_CHECK(pos_offset >= 0 && (T == 0 || pos_offset + T <= P),
                "{}: positions [{}, {}) are outside the position table [0, {})", op, pos_offset,
                pos_offset + T, P);
  }
  const int32_t* tok = tokens.i32();  // tokens: (B, T)
  // Checked before the parallel loop: an exception must not leave an OpenMP region.
  for (int64_t i = 0; i < B * T; ++i)
    BRAID_CHECK(tok[i] >= 0 && tok[i] < V,
                "{}: token id {} at (b={}, t={}) is outside the vocabulary [0, V={})", op, tok[i],
                i / T, i % T, V);

  // wte: (V, C); wpe: (P, C) or absent; out: (B, T, C). With 16-bit tables only the gathered
  // rows are widened (never the whole table), one row at a time.
  const cpu::TileIo io(ctx);
  const bool low = any_low_precision({&out, &wte, &wpe});
#pragma omp parallel
  {
    const cpu::TileBuffers buf(ctx, low, 3, C);  // token, position and output rows
#pragma omp for schedule(static)
    for (int64_t i = 0; i < B * T; ++i) {
      const float* trow = io.in(wte, static_cast<int64_t>(tok[i]) * C, C, buf[0]);
      float* orow = io.out(out, i * C, buf[2]);
      if (wpe.defined()) {
        const float* prow = io.in(wpe, (pos_offset + i % T) * C, C, buf[1]);
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) orow[c] = trow[c] + prow[c];
      } else {
        std::copy(trow, trow + C, orow);
      }
      io.store(out, i * C, C, orow);
    }
  }
}

// dwte: positions are sorted by (token id, position) and each distinct token's rows are added
// in position order by one thread; dwpe: each position sums its batch rows in order. Neither
// order depends on the thread count, and no two threads write the same row.
void embedding_backward(ExecContext& ctx, Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                        const Tensor& tokens, int64_t pos_offset) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  if (any_low_precision(
          {&dwte, &dwpe, &dout})) {  // bf16/f16 storage: f32 arithmetic on staged copies
    F32Staging s(ctx, "embedding_backward");
    Tensor dwte32 = s.out(dwte, "dwte", true), dwpe32 = s.out(dwpe, "dwpe", true);
    cpu::embedding_backward(ctx, dwte32, dwpe32, s.in(dout, "dout"), tokens, pos_offset);
    return s.finish();
  }
  const char* op = "embedding_backward";
  if (dwte.defined()) cpu::check_f32(dwte, op, "dwte");
  if (dwpe.defined()) cpu::check_f32(dwpe, op, "dwpe");
  cpu::check_f32(dout, op, "dout");
  cpu::check_cpu(tokens, op, "tokens");
  check_dtype(tokens, DType::I32, "embedding_backward tokens");
  BRAID_CHECK(tokens.ndim() == 2, "{}: tokens must be (B, T), got {}", op, tokens.str());
  BRAID_CHECK(dout.ndim() == 3, "{}: dout must be (B, T, C), got {}", op, dout.str());
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = dout.dim(2);
  const int64_t N = B * T;
  check_shape(dout, {B, T, C}, "embedding_backward dout");
  if (dwte.defined())
    BRAID_CHECK(dwte.ndim() == 2 && dwte.dim(1) == C, "{}: dwte must be (V, {}), got {}", op, C,
                dwte.str());
  const int32_t* tok = tokens.i32();  // tokens: (B, T)
  const float* d = dout.f32();        // dout: (B, T, C)

  if (dwpe.defined()) {
    BRAID_CHECK(dwpe.ndim() == 2 && dwpe.dim(1) == C, "{}: dwpe must be (P, {}), got {}", op, C,
                dwpe.str());
    const int64_t P = dwpe.dim(0);
    BRAID_CHECK(pos_offset >= 0 && (T == 0 || pos_offset + T <= P),
                "{}: positions [{}, {}) are outside the position table [0, {})", op, pos_offset,
                pos_offset + T, P);
    float* pg = dwpe.f32();  // dwpe: (P, C)
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      float* prow = pg + (pos_offset + t) * C;
      for (int64_t b = 0; b < B; ++b) {
        const float* drow = d + (b * T + t) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) prow[c] += drow[c];
      }
    }
  }

  if (!dwte.defined()) return;  // a frozen token table: no scatter at all
  const int64_t V = dwte.dim(0);
  // key = token id in the high half, flat position in the low half: one sort orders both.
  BRAID_CHECK(N < (int64_t{1} << 32), "{}: {} positions do not fit the 32-bit sort key", op, N);
  std::vector<uint64_t> keys(N);
  for (int64_t i = 0; i < N; ++i) {
    BRAID_CHECK(tok[i] >= 0 && tok[i] < V,
                "{}: token id {} at (b={}, t={}) is outside the vocabulary [0, V={})", op, tok[i],
                i / T, i % T, V);
    keys[i] = (static_cast<uint64_t>(tok[i]) << 32) | static_cast<uint64_t>(i);
  }
  std::sort(keys.begin(), keys.end());
  // starts[g] = index in keys of the first position of the g-th distinct token.
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < N; ++i)
    if (i == 0 || (keys[i] >> 32) != (keys[i - 1] >> 32)) starts.push_back(i);
  starts.push_back(N);
  const int64_t groups = static_cast<int64_t>(starts.size()) - 1;

  float* g = dwte.f32();  // dwte: (V, C)
  // Dynamic: token frequencies are skewed (a few ids own many positions).
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t k = 0; k < groups; ++k) {
    const int64_t s0 = starts[k], s1 = starts[k + 1];
    float* grow = g + static_cast<int64_t>(keys[s0] >> 32) * C;
    for (int64_t s = s0; s < s1; ++s) {
      const float* drow = d + static_cast<int64_t>(keys[s] & 0xffffffffu) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) grow[c] += drow[c];
    }
  }
}

// The partial lookup of a table holding some vocabulary rows: f32 arithmetic whatever the
// storage (16-bit tables are widened; the output is the f32 partial sum).
void embedding_rows_forward(ExecContext& ctx, Tensor& out, const Tensor& tokens, const Tensor& wte,
                            const Tensor& wpe, int64_t row_begin, int64_t vocab,
                            int64_t pos_offset) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "embedding_rows_forward";
  cpu::check_f32(out, op, "out");
  cpu::check_float_args(op, {{&wte, "wte"}});
  if (wpe.defined()) {
    cpu::check_cpu(wpe, op, "wpe");
    cpu::check_float_storage(wpe, op, "wpe");
  }
  cpu::check_cpu(tokens, op, "tokens");
  check_dtype(tokens, DType::I32, "embedding_rows_forward tokens");
  BRAID_CHECK(tokens.ndim() == 2, "{}: tokens must be (B, T), got {}", op, tokens.str());
  BRAID_CHECK(wte.ndim() == 2, "{}: wte must be (R, C), got {}", op, wte.str());
  const int64_t B = tokens.dim(0), T = tokens.dim(1), rows = wte.dim(0), C = wte.dim(1);
  check_shape(out, {B, T, C}, "embedding_rows_forward out");
  if (wpe.defined()) {
    BRAID_CHECK(wpe.ndim() == 2 && wpe.dim(1) == C, "{}: wpe must be (P, {}), got {}", op, C,
                wpe.str());
    BRAID_CHECK(pos_offset >= 0 && (T == 0 || pos_offset + T <= wpe.dim(0)),
                "{}: positions [{}, {}) are outside the position table [0, {})", op, pos_offset,
                pos_offset + T, wpe.dim(0));
  }
  const int32_t* tok = tokens.i32();
  for (int64_t i = 0; i < B * T; ++i)
    BRAID_CHECK(tok[i] >= 0 && tok[i] < vocab,
                "{}: token id {} at (b={}, t={}) is outside the vocabulary [0, {})", op, tok[i],
                i / T, i % T, vocab);
  // With 16-bit tables only the rows this shard holds for the batch's tokens are widened, one
  // at a time (never the whole shard), as embedding_forward does.
  const cpu::TileIo io(ctx);
  const bool low = any_low_precision({&wte, &wpe});
  float* o = out.f32();
#pragma omp parallel
  {
    const cpu::TileBuffers buf(ctx, low, 2, C);  // token and position rows
#pragma omp for schedule(static)
    for (int64_t i = 0; i < B * T; ++i) {
      float* row = o + i * C;
      const int64_t local = tok[i] - row_begin;
      if (local >= 0 && local < rows) {
        const float* trow = io.in(wte, local * C, C, buf[0]);
        std::copy(trow, trow + C, row);
      } else {
        std::fill(row, row + C, 0.0f);
      }
      if (wpe.defined()) {
        const float* prow = io.in(wpe, (pos_offset + i % T) * C, C, buf[1]);
        for (int64_t c = 0; c < C; ++c) row[c] += prow[c];
      }
    }
  }
}

// Threads split the columns: every gradient element sums its positions in position order, as
// one thread does (several positions may hold the same token).
void embedding_rows_backward(ExecContext& ctx, Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                             const Tensor& tokens, int64_t row_begin) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "embedding_rows_backward";
  if (!dwte.defined() && !dwpe.defined()) return;  // frozen tables: nothing to do
  if (any_low_precision({&dout})) {
    F32Staging s(ctx, op);
    cpu::embedding_rows_backward(ctx, dwte, dwpe, s.in(dout, "dout"), tokens, row_begin);
    return;
  }
  cpu::check_f32(dout, op, "dout");
  if (dwte.defined()) cpu::check_f32(dwte, op, "dwte");
  if (dwpe.defined()) cpu::check_f32(dwpe, op, "dwpe");
  check_dtype(tokens, DType::I32, "embedding_rows_backward tokens");
  BRAID_CHECK(tokens.ndim() == 2 && dout.ndim() == 3,
              "{}: tokens (B, T) and dout (B, T, C), got {} and {}", op, tokens.str(), dout.str());
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = dout.dim(2);
  check_shape(dout, {B, T, C}, "embedding_rows_backward dout");
  const int32_t* tok = tokens.i32();
  const float* d = dout.f32();
  constexpr int64_t kCols = 16;
  const int64_t col_blocks = (C + kCols - 1) / kCols;
  if (dwte.defined()) {
    BRAID_CHECK(dwte.ndim() == 2 && dwte.dim(1) == C, "{}: dwte must be (R, {}), got {}", op, C,
                dwte.str());
    const int64_t rows = dwte.dim(0);
    float* g = dwte.f32();
#pragma omp parallel for schedule(static)
    for (int64_t cb = 0; cb < col_blocks; ++cb) {
      const int64_t c0 = cb * kCols, c1 = std::min(C, c0 + kCols);
      for (int64_t i = 0; i < B * T; ++i) {
        const int64_t local = tok[i] - row_begin;
        if (local < 0 || local >= rows) continue;
        for (int64_t c = c0; c < c1; ++c) g[local * C + c] += d[i * C + c];
      }
    }
  }
  if (dwpe.defined()) {
    BRAID_CHECK(dwpe.ndim() == 2 && dwpe.dim(1) == C && T <= dwpe.dim(0),
                "{}: dwpe must be (P >= {}, {}), got {}", op, T, C, dwpe.str());
    float* g = dwpe.f32();
#pragma omp parallel for schedule(static)
    for (int64_t cb = 0; cb < col_blocks; ++cb) {
      const int64_t c0 = cb * kCols, c1 = std::min(C, c0 + kCols);
      for (int64_t i = 0; i < B * T; ++i)
        for (int64_t c = c0; c < c1; ++c) g[(i % T) * C + c] += d[i * C + c];
    }
  }
}

}  // namespace cpu
}  // namespace braid
