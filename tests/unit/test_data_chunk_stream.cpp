// ChunkStream and BpeChunkCounts: a text fed in arbitrary pieces is pre-split, counted and
// trained on exactly as the whole text is.
#include <gtest/gtest.h>

#include <random>

#include "data/bpe_tokenizer.h"
#include "data/chunk_stream.h"
#include "data/pretokenize.h"
#include "data_test_util.h"

namespace braid {
namespace {

// Text from few byte classes, with long runs, so chunks often straddle piece cuts.
std::string random_text(std::mt19937& rng, size_t n) {
  static const char alphabet[] = {' ', ' ', ' ', '\n', '\t', 'a', 'b', '1', '.', '\xc3'};
  std::string s;
  while (s.size() < n) {
    const char c = alphabet[rng() % sizeof(alphabet)];
    s.append(rng() % 4 == 0 ? 1 + rng() % 9 : 1, c);
  }
  return s;
}

// Cuts text at random places (empty pieces included) and returns what the stream emits.
std::vector<std::string> stream_spans(std::string_view text, std::mt19937& rng) {
  std::vector<std::string> spans;
  ChunkStream stream([&](std::string_view s) { spans.emplace_back(s); });
  for (size_t at = 0; at < text.size();) {
    const size_t n = std::min<size_t>(text.size() - at, rng() % 12);
    stream.push(text.substr(at, n));
    at += n;
  }
  stream.finish();
  return spans;
}

std::vector<std::string> chunks_of(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view c : pretokenize(text)) out.emplace_back(c);
  return out;
}

TEST(DataChunkStream, SpansSplitLikeTheWholeText) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = random_text(rng, 1 + rng() % 200);
    std::string joined;
    std::vector<std::string> chunks;
    for (const std::string& span : stream_spans(text, rng)) {
      EXPECT_FALSE(span.empty());
      joined += span;
      for (std::string& c : chunks_of(span)) chunks.push_back(std::move(c));
    }
    ASSERT_EQ(joined, text);
    ASSERT_EQ(chunks, chunks_of(text)) << "text: '" << text << "'";
  }
}

TEST(DataChunkStream, LongRunsAcrossManyPieces) {
  // One chunk much longer than the pieces: held back whole, emitted once it ends.
  const std::string text =
      "x " + std::string(5000, 'w') + std::string(3000, ' ') + "y\n" + std::string(700, '\n');
  std::vector<std::string> spans;
  ChunkStream stream([&](std::string_view s) { spans.emplace_back(s); });
  for (size_t at = 0; at < text.size(); at += 100)
    stream.push(std::string_view(text).substr(at, 100));
  stream.finish();
  std::vector<std::string> chunks;
  for (const std::string& span : spans)
    for (std::string& c : chunks_of(span)) chunks.push_back(std::move(c));
  EXPECT_EQ(chunks, chunks_of(text));
  EXPECT_EQ(chunks.size(), 5u);  // "x", " w...", spaces, " y", newlines
  // After finish() the stream starts a new text: nothing carries over.
  spans.clear();
  stream.push("  ");
  stream.finish();
  stream.push(" a");
  stream.finish();
  EXPECT_EQ(spans, (std::vector<std::string>{"  ", " a"}));
}

TEST(DataBpeChunkCounts, PiecesGiveTheSameTokenizerAsTheWholeText) {
  std::mt19937 rng(11);
  // Documents that start and end with whitespace runs, so pieces meet inside chunks.
  std::string text;
  for (int d = 0; d < 6; ++d)
    text += std::string(d % 3, ' ') + "\n" + testing::sample_text(700, d) + "\n\n  ";
  BpeChunkCounts whole, pieces;
  whole.add(text);
  ChunkStream stream([&](std::string_view s) { pieces.add(s); });
  for (size_t at = 0; at < text.size();) {
    const size_t n = std::min<size_t>(text.size() - at, 1 + rng() % 40);
    stream.push(std::string_view(text).substr(at, n));
    at += n;
  }
  stream.finish();
  EXPECT_EQ(pieces.total(), static_cast<int64_t>(pretokenize(text).size()));
  EXPECT_EQ(pieces.sorted(), whole.sorted());
  EXPECT_GT(pieces.count(" the"), 10);
  EXPECT_EQ(pieces.count("no such chunk"), 0);
  const BpeTokenizer a = train_bpe(pieces, 420);
  const BpeTokenizer b = train_bpe(std::vector<std::string>{text}, 420);
  EXPECT_EQ(a.vocab_size(), 420);
  EXPECT_EQ(a.merges(), b.merges());
}

TEST(DataBpeChunkCounts, SortedInByteOrder) {
  BpeChunkCounts c;
  c.add("b a \xc3\xa9 b B");
  const auto s = c.sorted();
  std::vector<std::string_view> keys;
  for (auto& [k, n] : s) keys.push_back(k);
  // Bytes >= 0x80 sort after ASCII, as unsigned bytes.
  EXPECT_EQ(keys, (std::vector<std::string_view>{" B", " a", " b", " \xc3\xa9", "b"}));
  EXPECT_EQ(c.count(" b"), 1);
  EXPECT_EQ(c.total(), 5);
  EXPECT_EQ(c.distinct(), 5u);
}

}  // namespace
}  // namespace braid
