// `braid prepare` as a library call: text files -> braid_tokenizer.json, train.bin, val.bin,
// meta.json.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace braid {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files or directories (recursed); read in sorted path order
  std::string out_dir;
  // "byte", "bpe", or the path of a Hugging Face model folder or tokenizer.json (or a braid
  // tokenizer file): that tokenizer encodes the documents as they are, nothing is trained.
  std::string tokenizer = "bpe";
  int vocab_size = 0;               // 0: 512 for bpe, 256 for byte (byte accepts only 256)
  double val_fraction = 0.05;       // in [0, 0.5]
  bool force = false;               // allow writing into a non-empty out_dir
  // Text of the end-of-text token put after every document ("" for none). "auto": the bpe
  // tokenizer gets "<|endoftext|>", the byte tokenizer none (its vocabulary stays 256).
  std::string eot = "auto";
  // Field holding a sample's text in .jsonl inputs (prompt/completion pairs need no field name).
  std::string text_field = "text";
};

// File names of the per-token flags written beside train.bin and val.bin when an input is JSONL:
// a shard (vocabulary 4) with one value per token, bit 0 = trained (loss mask 1), bit 1 = the
// token starts a sample.
inline constexpr const char* kTrainFlagsFile = "train.flags.bin";
inline constexpr const char* kValFlagsFile = "val.flags.bin";
inline constexpr int32_t kFlagTrained = 1;
inline constexpr int32_t kFlagSampleStart = 2;

struct PrepareSummary {
  int64_t documents = 0;
  int64_t input_bytes = 0;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  int64_t jsonl_samples = 0;        // samples read from .jsonl inputs (also in documents)
  int64_t untrained_train_tokens = 0;  // prompt tokens of train.bin (loss mask 0)
  bool flags = false;               // train.flags.bin and val.flags.bin were written
  std::string tokenizer;
  std::string tokenizer_fingerprint;  // Tokenizer::fingerprint(), also in meta.json
  int vocab_size = 0;
  double unigram_entropy_nats = 0;  // of the training tokens
  double tokenizer_train_s = 0;
  double total_s = 0;
};

// With a given tokenizer (a path in opts.tokenizer), every train and val part of a document is
// encoded whole, led by the tokenizer's bos token when its configuration adds one and followed
// by its end-of-text (eos) token; opts.eot and vocab_size do not apply.
// Each input file is one document, except .jsonl files (data/jsonl_input.h): each of their
// lines is one sample (counted as a document), its pieces encoded one by one, followed by the
// end-of-text token (trained); a chat line (`messages`) is rendered by the given tokenizer's
// chat template (data/chat_template.h) and encoded whole, nothing added, only the assistant
// turns trained. The last val_fraction of a JSONL file's samples (rounded down)
// goes to val.bin. With any JSONL input, train.flags.bin and val.flags.bin hold each token's
// loss mask and sample starts (text documents: all trained, one sample each). A document gets
// a trailing '\n' if it lacks one; with an
// end-of-text token (opts.eot) that token also follows every document's train and val part,
// and the tokenizer knows it as a special token (the last id). BPE uses the GPT-2 pre-split.
// Held-out split: the last val_fraction of every document (cut moved forward to the next line
// start) goes to val.bin, the rest to train.bin, so validation covers every document. The
// tokenizer is trained on the training part only. Bad inputs, options or a non-empty out_dir
// without force are braid::UserError. Documents are read one at a time (twice for bpe: chunk
// counts, then encoding), so memory is bounded by the largest file plus the table of distinct
// pre-split chunks, not by the corpus size; the outputs are the same as if all training
// (validation) parts were one text. A failure while reading or encoding writes no train.bin or
// val.bin and leaves no temp file.
PrepareSummary prepare(const PrepareOptions& opts);

// A few lines for the terminal.
std::string format_prepare_summary(const PrepareSummary& s, const std::string& out_dir);

// The regular files named by inputs (directories recursed), sorted, each real file once
// (symlinks resolved), with anything inside
// skip_dir (the output folder) left out. A missing path is a braid::UserError.
std::vector<std::string> list_input_files(const std::vector<std::string>& inputs,
                                          const std::string& skip_dir);

// (train part, val part) of one document, as described for prepare().
std::pair<std::string_view, std::string_view> split_document(std::string_view doc,
                                                             double val_fraction);

// Entropy of the unigram distribution of ids, in nats per token (0 for no ids).
double unigram_entropy(std::span<const int32_t> ids, int vocab_size);

// The same from counts[id] = occurrences of id, so ids can be counted as they stream by.
double unigram_entropy_of_counts(std::span<const int64_t> counts);

}  // namespace braid
