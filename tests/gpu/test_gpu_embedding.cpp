// CUDA token + position embedding against the CPU kernels. Both add the same values in the
// same order (f32, rounded once), so forward and backward agree bit for bit in every dtype:
// repeated tokens, odd widths (1 to 4097), position offsets, gradients accumulated onto
// non-zero values, frozen tables, vocabulary shards, and out-of-vocabulary tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/kernels/embedding.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

bool same_bits(const Tensor& device, const Tensor& host) {
  const Tensor h = device.to_host();
  return h.nbytes() == host.nbytes() && std::memcmp(h.raw(), host.raw(), h.nbytes()) == 0;
}

struct Size {
  int64_t B, T, V, C;
};
// V = 1 (every position the same token), V far above the tokens drawn, widths around the
// kernels' 256-column tiles and 32-row blocks.
const Size kSizes[] = {{1, 1, 1, 1},        {3, 41, 1, 31},    {2, 300, 70, 257},
                       {1, 31, 5000, 4097}, {4, 129, 33, 256}, {2, 600, 1000, 64}};

class GpuEmbedding : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuEmbedding, ForwardAndBackwardMatchCpuBitForBit) {
  const DType dt = GetParam();
  for (const Size& s : kSizes) {
    const int64_t B = s.B, T = s.T, V = s.V, C = s.C, P = T + 9, off = 5;
    const std::string at = "B=" + std::to_string(B) + " T=" + std::to_string(T) +
                           " V=" + std::to_string(V) + " C=" + std::to_string(C);
    // Few distinct ids, so rows repeat many times.
    const Tensor tokens = random_tokens({B, T}, static_cast<int32_t>(std::min<int64_t>(V, 97)), 1);
    const Tensor wte = random_host({V, C}, dt, 2), wpe = random_host({P, C}, dt, 3);
    const Tensor gtok = up(tokens), gwte = up(wte), gwpe = up(wpe);
    for (bool with_pos : {true, false}) {
      Tensor out_c = Tensor::empty({B, T, C}, dt), none;
      embedding_forward(cpu(), out_c, tokens, wte, with_pos ? wpe : none, off);
      Tensor out = poisoned({B, T, C}, dt);
      embedding_forward(gpu(), out, gtok, gwte, with_pos ? gwpe : none, off);
      EXPECT_TRUE(same_bits(out, out_c)) << "forward pos=" << with_pos << " " << at;
    }

    const Tensor dout = random_host({B, T, C}, dt, 4);
    const Tensor dwte0 = random_host({V, C}, dt, 5), dwpe0 = random_host({P, C}, dt, 6);
    Tensor dwte_c = dwte0.clone(), dwpe_c = dwpe0.clone();
    embedding_backward(cpu(), dwte_c, dwpe_c, dout, tokens, off);
    const Tensor gdout = up(dout);
    Tensor dwte = up(dwte0), dwpe = up(dwpe0);
    embedding_backward(gpu(), dwte, dwpe, gdout, gtok, off);
    EXPECT_TRUE(same_bits(dwte, dwte_c)) << "dwte " << at;
    EXPECT_TRUE(same_bits(dwpe, dwpe_c)) << "dwpe " << at;
    // Frozen token table: positions only; frozen positions: the table only.
    Tensor none, dwpe2 = up(dwpe0), dwte2 = up(dwte0);
    embedding_backward(gpu(), none, dwpe2, gdout, gtok, off);
    embedding_backward(gpu(), dwte2, none, gdout, gtok, off);
    EXPECT_TRUE(same_bits(dwpe2, dwpe_c) && same_bits(dwte2, dwte_c)) << "frozen " << at;
  }
}

// A vocabulary shard: rows [row_begin, row_begin + R) of the table, f32 partial sums.
// More positions than the forward's grid of row blocks (2^20): the blocks loop over the rest.
TEST_F(GpuTest, EmbeddingOverMoreRowsThanBlocks) {
  const int64_t T = (int64_t{1} << 20) + 3, V = 50, C = 8;
  const Tensor tokens = random_tokens({1, T}, static_cast<int32_t>(V), 41);
  const Tensor wte = random_host({V, C}, DType::F32, 42), wpe = random_host({T, C}, DType::F32, 43);
  Tensor out_c = Tensor::empty({1, T, C}), out = poisoned({1, T, C}, DType::F32);
  embedding_forward(cpu(), out_c, tokens, wte, wpe, 0);
  embedding_forward(gpu(), out, up(tokens), up(wte), up(wpe), 0);
  EXPECT_TRUE(same_bits(out, out_c));
}

TEST_P(GpuEmbedding, VocabularyRowsMatchCpuBitForBit) {
  const DType dt = GetParam();
  const int64_t B = 3, T = 77, V = 1000, R = 300, row_begin = 250, C = 257, P = T + 4;
  const Tensor tokens = random_tokens({B, T}, static_cast<int32_t>(V), 7);
  const Tensor wte = random_host({R, C}, dt, 8), wpe = random_host({P, C}, dt, 9);
  for (bool with_pos : {true, false}) {
    Tensor none, out_c = Tensor::empty({B, T, C});
    embedding_rows_forward(cpu(), out_c, tokens, wte, with_pos ? wpe : none, row_begin, V, 3);
    Tensor out = poisoned({B, T, C}, DType::F32);
    Tensor gwpe = with_pos ? up(wpe) : none;
    embedding_rows_forward(gpu(), out, up(tokens), up(wte), gwpe, row_begin, V, 3);
    EXPECT_TRUE(same_bits(out, out_c)) << "forward pos=" << with_pos;
  }
  const Tensor dout = random_host({B, T, C}, dt, 10);
  const Tensor dwte0 = random_host({R, C}, DType::F32, 11),
               dwpe0 = random_host({P, C}, DType::F32, 12);
  Tensor dwte_c = dwte0.clone(), dwpe_c = dwpe0.clone();
  embedding_rows_backward(cpu(), dwte_c, dwpe_c, dout, tokens, row_begin);
  Tensor dwte = up(dwte0), dwpe = up(dwpe0);
  embedding_rows_backward(gpu(), dwte, dwpe, up(dout), up(tokens), row_begin);
  EXPECT_TRUE(same_bits(dwte, dwte_c));
  EXPECT_TRUE(same_bits(dwpe, dwpe_c));
}

TEST_P(GpuEmbedding, TokensOutsideTheVocabularyThrow) {
  const DType dt = GetParam();
  Tensor tokens = random_tokens({2, 9}, 10, 13);
  tokens.i32()[11] = 10;
  const Tensor gtok = up(tokens), wte = up(random_host({10, 8}, dt, 14));
  Tensor out = poisoned({2, 9, 8}, dt), none;
  try {
    embedding_forward(gpu(), out, gtok, wte, none, 0);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("token id 10 at (b=1, t=2)"), std::string::npos)
        << e.what();
  }
  Tensor dwte = up(random_host({10, 8}, dt, 15));
  EXPECT_THROW(embedding_backward(gpu(), dwte, none, up(random_host({2, 9, 8}, dt, 16)), gtok, 0),
               std::runtime_error);
  Tensor out32 = poisoned({2, 9, 8}, DType::F32);
  EXPECT_THROW(embedding_rows_forward(gpu(), out32, gtok, wte, none, 0, 10, 0), std::runtime_error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuEmbedding,
                         ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace braid::gpu_test
