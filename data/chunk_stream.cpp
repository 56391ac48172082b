// ChunkStream: find chunk boundaries across piece boundaries, holding back one chunk.
#include "data/chunk_stream.h"

#include <algorithm>
#include <vector>

#include "data/pretokenize.h"

namespace braid {

namespace {

constexpr size_t kNone = std::string_view::npos;

// Where the first chunk that starts at or after head.size() begins in head + more, or kNone
// when a chunk starting inside head runs through all of more (more text could extend it).
// Reads only as much of more as the decision needs, doubling the look-ahead.
size_t first_boundary_after(std::string_view head, std::string_view more, std::string& joined) {
  size_t take = std::min<size_t>(more.size(), 256);
  for (;;) {
    joined.assign(head);
    joined.append(more.substr(0, take));
    size_t pos = 0;
    bool open = false;
    while (pos < head.size()) {
      const size_t end = pretokenize_chunk_end(joined, pos);
      if (end == joined.size()) {
        open = true;
        break;
      }
      pos = end;
    }
    if (!open) return pos;
    if (take == more.size()) return kNone;
    take = std::min(more.size(), 2 * take);
  }
}

}  // namespace

void ChunkStream::push_regex(std::string_view piece) {
  tail_.append(piece);
  const size_t n = tail_.size();
  // Chunk boundaries that more text can no longer move.
  std::vector<size_t> cuts{0};
  for (size_t i = 0; i < n;) {
    const size_t j = split_.chunk_end(tail_, i);
    if (j == n || j + PreSplit::kUnsettledBytes > n) break;
    cuts.push_back(i = j);
  }
  // The consumer splits the span again on its own, where the span's end is the end of the
  // text: a look-ahead there (a whitespace run before '\'' is cut differently when nothing
  // follows) may change the last chunks. Cut only where the span alone splits the same way.
  size_t k = cuts.size() - 1;
  for (; k > 0; --k) {
    const std::string_view span = std::string_view(tail_).substr(0, cuts[k]);
    const size_t first = k >= 2 ? k - 2 : 0;
    bool same = true;
    for (size_t c = first + 1, a = cuts[first]; c <= k && same; ++c)
      same = (a = split_.chunk_end(span, a)) == cuts[c];
    if (same) break;
  }
  if (k == 0) return;
  scratch_.assign(tail_, 0, cuts[k]);
  tail_.erase(0, cuts[k]);
  emit_(scratch_);
}

void ChunkStream::push(std::string_view piece) {
  if (piece.empty()) return;
  if (!split_.is_legacy()) return push_regex(piece);
  std::string_view rest = piece;
  if (!tail_.empty()) {
    // tail_ is one chunk: an optional glued ' ' then a run of one byte class. How it goes on
    // depends only on its first two bytes, its last byte and what follows, so a three-byte
    // stand-in decides it; a long held-back run is thus never copied again per piece.
    const size_t t = tail_.size();
    const std::string head = t <= 3 ? tail_ : tail_.substr(0, 2) + tail_.back();
    size_t b = first_boundary_after(head, piece, joined_);
    if (b == kNone) {
      tail_.append(piece);
      return;
    }
    b += t - head.size();  // from stand-in to real coordinates in tail_ + piece; b >= t
    scratch_.assign(tail_);
    scratch_.append(piece.substr(0, b - t));
    tail_.clear();
    emit_(scratch_);
    rest = piece.substr(b - t);
  }
  // Every chunk of rest but the last is final; hold the last one back.
  size_t last = 0;
  for (size_t i = 0; i < rest.size(); i = pretokenize_chunk_end(rest, i)) last = i;
  if (last > 0) emit_(rest.substr(0, last));
  tail_.assign(rest.substr(last));
}

void ChunkStream::finish() {
  if (tail_.empty()) return;
  scratch_.swap(tail_);
  tail_.clear();
  emit_(scratch_);
}

}  // namespace braid
