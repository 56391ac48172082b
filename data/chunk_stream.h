// ChunkStream: cuts a text that arrives in pieces into spans that end on pre-split chunk
// boundaries, so the pieces can be counted or encoded one at a time.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "data/pretokenize.h"

namespace braid {

// Pieces of one text go in through push(); emit receives consecutive spans that together are
// the whole text, each starting and ending on a boundary between the text's pretokenize()
// chunks. pretokenize() of every span therefore gives exactly the chunks the whole text has
// there, whereas cutting at arbitrary places would not (a run of spaces or letters can go on in
// the next piece). Only the last chunk seen so far is held back (copied) until the text goes on
// or finish() is called; the spans emit receives are valid only during the call.
class ChunkStream {
 public:
  using Emit = std::function<void(std::string_view span)>;

  explicit ChunkStream(Emit emit, PreSplit split = PreSplit::legacy())
      : emit_(std::move(emit)), split_(std::move(split)) {}

  void push(std::string_view piece);
  // Emits what is held back; the text has ended. The stream is then empty and may start a
  // new text.
  void finish();

 private:
  // For a regex pre-split: hold back the chunks within PreSplit::kUnsettledBytes of the end.
  void push_regex(std::string_view piece);

  Emit emit_;
  PreSplit split_;
  std::string tail_;     // the last chunk so far, which the next piece may extend
  std::string scratch_;  // reused buffers for spans that join tail_ and a piece
  std::string joined_;
};

}  // namespace braid
