// ChunkStream: find chunk boundaries across piece boundaries, holding back one chunk.
#include "data/chunk_stream.h"

#include <algorithm>

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

void ChunkStream::push(std::string_view piece) {
  if (piece.empty()) return;
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
