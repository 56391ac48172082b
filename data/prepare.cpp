// prepare(): stream the documents twice (count chunks for BPE; encode into shards), write all.
#include "data/prepare.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/chat_template.h"
#include "data/chunk_stream.h"
#include "data/file_util.h"
#include "data/hf_bpe.h"
#include "data/jsonl_input.h"
#include "data/shard.h"

namespace braid {

namespace fs = std::filesystem;

namespace {

bool inside(const fs::path& p, const fs::path& dir) {
  if (dir.empty()) return false;
  auto [d, q] = std::mismatch(dir.begin(), dir.end(), p.begin(), p.end());
  return d == dir.end();
}

void check_out_dir(const PrepareOptions& o) {
  if (o.out_dir.empty()) user_error("--out is empty; expected the folder to write shards into");
  std::error_code ec;
  if (!fs::exists(o.out_dir, ec)) return;
  if (!fs::is_directory(o.out_dir, ec))
    user_error("--out '{}' exists and is not a folder; choose a folder path", o.out_dir);
  if (!fs::is_empty(o.out_dir, ec) && !o.force)
    user_error("--out '{}' is not empty; pass --force to overwrite braid_tokenizer.json, train.bin, "
               "val.bin and meta.json there, or choose an empty or new folder", o.out_dir);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Reads a whole input file, with room for the '\n' a document may need, in one allocation:
// the largest input file bounds prepare's memory.
std::string read_document(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) user_error("cannot open input file '{}': {}", path, std::strerror(errno));
  const std::streamoff size = in.tellg();
  std::string doc;
  if (size > 0) doc.reserve(static_cast<size_t>(size) + 1);
  in.seekg(0);
  char block[1 << 16];
  while (in.read(block, sizeof(block)) || in.gcount() > 0)
    doc.append(block, static_cast<size_t>(in.gcount()));
  if (in.bad()) user_error("error reading input file '{}'", path);
  return doc;
}

// Calls doc(train part, val part) for every non-empty text document and sample(sample, in_val)
// for every sample of a .jsonl input, files read one at a time, and adds the documents and
// their bytes to s.
template <typename DocFn, typename SampleFn>
void for_each_input(const std::vector<std::string>& files, const PrepareOptions& o,
                    const ChatTemplateSource& chat, PrepareSummary& s, DocFn&& doc_fn,
                    SampleFn&& sample_fn) {
  for (const std::string& f : files) {
    std::string doc = read_document(f);
    if (is_jsonl_path(f)) {
      s.input_bytes += static_cast<int64_t>(doc.size());
      const std::vector<JsonlSample> samples = read_jsonl_samples(f, doc, o.text_field, chat);
      doc = std::string();
      const size_t n_val = static_cast<size_t>(
          std::floor(static_cast<double>(samples.size()) * o.val_fraction));
      for (size_t i = 0; i < samples.size(); ++i) sample_fn(samples[i], i >= samples.size() - n_val);
      s.documents += static_cast<int64_t>(samples.size());
      s.jsonl_samples += static_cast<int64_t>(samples.size());
      continue;
    }
    if (doc.empty()) continue;
    if (doc.back() != '\n') doc.push_back('\n');
    ++s.documents;
    s.input_bytes += static_cast<int64_t>(doc.size());
    auto [train, val] = split_document(doc, o.val_fraction);
    doc_fn(train, val);
  }
}

// One output shard and, with flags, its per-token flags shard (prepare.h): the next token
// added after begin_sample() is marked as a sample start.
struct TokenSink {
  TokenSink(const fs::path& ids_path, const fs::path& flags_path, int vocab_size, bool flags)
      : ids(ids_path.string(), vocab_size) {
    if (flags) this->flags.emplace(flags_path.string(), 4);
  }
  void begin_sample() { start = true; }
  void add(std::span<const int32_t> t, bool trained) {
    ids.append(t);
    if (!trained) untrained += static_cast<int64_t>(t.size());
    if (!flags || t.empty()) return;
    scratch.assign(t.size(), trained ? kFlagTrained : 0);
    if (start) scratch[0] |= kFlagSampleStart;
    start = false;
    flags->append(scratch);
  }
  void finish() {
    ids.finish();
    if (flags) flags->finish();
  }

  ShardWriter ids;
  std::optional<ShardWriter> flags;
  bool start = true;
  int64_t untrained = 0;
  std::vector<int32_t> scratch;
};

// Pushes text in blocks, so what is built per span (chunk lists, encoded ids) stays small
// however large one document is.
void feed(ChunkStream& stream, std::string_view text) {
  constexpr size_t kBlockBytes = size_t{1} << 20;
  for (size_t at = 0; at < text.size(); at += kBlockBytes)
    stream.push(text.substr(at, kBlockBytes));
}

}  // namespace

std::vector<std::string> list_input_files(const std::vector<std::string>& inputs,
                                          const std::string& skip_dir) {
  std::error_code ec;
  const fs::path skip = skip_dir.empty() || !fs::exists(skip_dir, ec) ? fs::path()
                                                                      : fs::canonical(skip_dir);
  std::vector<std::pair<std::string, fs::path>> found;  // (path as named, canonical path)
  auto add = [&](const fs::path& p) {
    fs::path c = fs::canonical(p);
    if (!inside(c, skip)) found.emplace_back(p.string(), std::move(c));
  };
  for (const std::string& in : inputs) {
    if (!fs::exists(in, ec)) user_error("--input '{}' does not exist; expected a text file or a folder", in);
    if (fs::is_directory(in, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(in, fs::directory_options::skip_permission_denied))
        if (e.is_regular_file()) add(e.path());
    } else if (fs::is_regular_file(in, ec)) {
      add(in);
    } else {
      user_error("--input '{}' is neither a regular file nor a folder", in);
    }
  }
  // Symlinks (GPL -> GPL-3) and repeated inputs would duplicate a document: keep the
  // first path in sorted order for each real file.
  std::sort(found.begin(), found.end());
  std::set<fs::path> seen;
  std::vector<std::string> files;
  for (auto& [p, c] : found)
    if (seen.insert(c).second) files.push_back(p);
  return files;
}

std::pair<std::string_view, std::string_view> split_document(std::string_view doc,
                                                             double val_fraction) {
  if (val_fraction <= 0) return {doc, {}};
  size_t cut = static_cast<size_t>(std::floor(static_cast<double>(doc.size()) * (1.0 - val_fraction)));
  // Start the held-out part at a line start so no word is cut in two.
  if (cut > 0 && cut < doc.size()) {
    size_t nl = doc.find('\n', cut - 1);
    if (nl != std::string_view::npos) cut = nl + 1;
  }
  cut = std::min(cut, doc.size());
  return {doc.substr(0, cut), doc.substr(cut)};
}

double unigram_entropy(std::span<const int32_t> ids, int vocab_size) {
  std::vector<int64_t> counts(static_cast<size_t>(vocab_size), 0);
  for (int32_t id : ids) ++counts[static_cast<size_t>(id)];
  return unigram_entropy_of_counts(counts);
}

double unigram_entropy_of_counts(std::span<const int64_t> counts) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  if (total == 0) return 0;
  const double n = static_cast<double>(total);
  double h = 0;
  for (int64_t c : counts)
    if (c > 0) h -= (c / n) * std::log(c / n);
  return h;
}

PrepareSummary prepare(const PrepareOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool given = o.tokenizer != "byte" && o.tokenizer != "bpe";
  if (given && o.vocab_size != 0)
    user_error("--vocab-size is {} but --tokenizer '{}' is a given tokenizer with its own "
               "vocabulary; drop --vocab-size", o.vocab_size, o.tokenizer);
  if (given && o.eot != "auto")
    user_error("--eot '{}' does not apply to --tokenizer '{}': its eos token ends every "
               "document; drop --eot", o.eot, o.tokenizer);
  if (o.tokenizer == "byte" && o.vocab_size != 0 && o.vocab_size != 256)
    user_error("--vocab-size is {} but the byte tokenizer has exactly 256 tokens; drop "
               "--vocab-size or use --tokenizer bpe", o.vocab_size);
  if (o.tokenizer == "bpe" && o.vocab_size != 0 && (o.vocab_size < 257 || o.vocab_size > 65536))
    user_error("--vocab-size is {}; expected 257..65536 for bpe", o.vocab_size);
  if (!(o.val_fraction >= 0 && o.val_fraction <= 0.5))
    user_error("--val-fraction is {}; expected a number in [0, 0.5]", o.val_fraction);
  if (o.inputs.empty()) user_error("no --input given; expected text files or folders");
  check_out_dir(o);

  const std::vector<std::string> files = list_input_files(o.inputs, o.out_dir);
  const bool bpe = o.tokenizer == "bpe";
  const std::string eot =
      given ? "" : o.eot == "auto" ? (bpe ? "<|endoftext|>" : "") : o.eot == "none" ? "" : o.eot;
  PrepareSummary s;
  auto no_text = [&] {
    user_error("the inputs ({} files) hold no text; expected non-empty text files", files.size());
  };

  // Chat lines are rendered by the given tokenizer's chat template, read at the first one.
  std::unique_ptr<Tokenizer> tok;
  std::optional<ChatTemplate> chat_template;
  const ChatTemplateSource chat = [&]() -> const ChatTemplate& {
    if (!given)
      user_error("chat data ('messages') is rendered by the model's chat template; pass "
                 "--tokenizer with the model's Hugging Face folder (its tokenizer_config.json "
                 "holds the template), not '{}'", o.tokenizer);
    if (!chat_template) chat_template = ChatTemplate::of_tokenizer(*tok, o.tokenizer);
    return *chat_template;
  };

  // Pass 1 (bpe only): count the chunks of the training text, one document at a time. The
  // training parts of all documents form one text, as the encoder of pass 2 sees it.
  if (given) {
    tok = load_tokenizer_path(o.tokenizer);
  } else if (bpe) {
    const auto t_tok = std::chrono::steady_clock::now();  // counting is part of training
    BpeChunkCounts counts(PreSplit::gpt2());
    ChunkStream stream([&](std::string_view span) { counts.add(span); }, PreSplit::gpt2());
    // Each document is its own text: with an end-of-text token between them, no chunk spans two.
    for_each_input(
        files, o, chat, s,
        [&](std::string_view train, std::string_view) {
          feed(stream, train);
          if (!eot.empty()) stream.finish();
        },
        [&](const JsonlSample& sample, bool in_val) {
          if (in_val) return;
          stream.finish();  // each piece is a text of its own
          for (const TextPiece& p : sample.pieces) {
            feed(stream, p.text);
            stream.finish();
          }
        });
    stream.finish();
    if (counts.empty()) no_text();
    // The end-of-text token takes the last id, so the vocabulary is vocab_size in all.
    const int merged_vocab = (o.vocab_size ? o.vocab_size : 512) - (eot.empty() ? 0 : 1);
    BpeTokenizer trained = train_bpe(counts, merged_vocab);
    tok = std::make_unique<BpeTokenizer>(eot.empty() ? trained : trained.with_eot(eot));
    s.tokenizer_train_s = seconds_since(t_tok);
  } else {
    if (!eot.empty())
      user_error("--eot '{}' needs --tokenizer bpe; the byte tokenizer has exactly the 256 byte "
                 "values (documents are separated by a newline)", eot);
    tok = std::make_unique<ByteTokenizer>();
  }
  const std::optional<int32_t> eot_id = tok->eot_id();
  const std::optional<int32_t> bos_id = tok->bos_id();

  // Pass 2: encode the training and validation texts into their shards as they stream by.
  // A failure here leaves neither shard (their writers remove the temp files), nor the output
  // folder if this call created it; the tokenizer and meta.json are written only afterwards.
  const fs::path out(o.out_dir);
  std::error_code ec;
  const bool made_out_dir = !fs::exists(out, ec);
  fs::create_directories(out);
  std::vector<int64_t> unigram(static_cast<size_t>(tok->vocab_size()), 0);
  const bool flags = std::any_of(files.begin(), files.end(),
                                 [](const std::string& f) { return is_jsonl_path(f); });
  try {
    TokenSink train_w(out / "train.bin", out / kTrainFlagsFile, tok->vocab_size(), flags);
    TokenSink val_w(out / "val.bin", out / kValFlagsFile, tok->vocab_size(), flags);
    const PreSplit split = bpe ? PreSplit::gpt2() : PreSplit::legacy();
    auto encode_train = [&](std::span<const int32_t> ids, bool trained) {
      train_w.add(ids, trained);
      for (int32_t id : ids) ++unigram[static_cast<size_t>(id)];
    };
    ChunkStream train_stream([&](std::string_view span) { encode_train(tok->encode(span), true); },
                             split);
    ChunkStream val_stream([&](std::string_view span) { val_w.add(tok->encode(span), true); },
                           split);
    PrepareSummary pass2;
    // A given tokenizer's normalizer and prefix space see each part whole, as a model's own
    // tokenizer would: bos? part eos.
    auto encode_part = [&](std::string_view part, auto&& append) {
      if (part.empty()) return;
      std::vector<int32_t> ids;
      if (bos_id) ids.push_back(*bos_id);
      const std::vector<int32_t> body = tok->encode(part);
      ids.insert(ids.end(), body.begin(), body.end());
      if (eot_id) ids.push_back(*eot_id);
      append(std::span<const int32_t>(ids));
    };
    for_each_input(
        files, o, chat, pass2,
        [&](std::string_view train, std::string_view val) {
          if (flags) {  // sample starts fall on the document's first tokens
            train_stream.finish();
            val_stream.finish();
            train_w.begin_sample();
            val_w.begin_sample();
          }
          if (given) {
            encode_part(train, [&](std::span<const int32_t> ids) { encode_train(ids, true); });
            encode_part(val, [&](std::span<const int32_t> ids) { val_w.add(ids, true); });
            return;
          }
          feed(train_stream, train);
          feed(val_stream, val);
          if (!eot_id) return;
          train_stream.finish();
          val_stream.finish();
          encode_train(std::span(&*eot_id, 1), true);
          if (!val.empty()) val_w.add(std::span(&*eot_id, 1), true);
        },
        [&](const JsonlSample& sample, bool in_val) {
          train_stream.finish();
          val_stream.finish();
          TokenSink& sink = in_val ? val_w : train_w;
          auto add = [&](std::span<const int32_t> ids, bool trained) {
            if (in_val)
              sink.add(ids, trained);
            else
              encode_train(ids, trained);
          };
          sink.begin_sample();
          if (sample.chat) {  // the template placed bos and the end-of-turn tokens
            const EncodedChat e = encode_chat(*tok, sample.pieces);
            for (size_t a = 0; a < e.ids.size();) {
              size_t b = a;
              while (b < e.ids.size() && e.trained[b] == e.trained[a]) ++b;
              add(std::span(e.ids).subspan(a, b - a), e.trained[a] != 0);
              a = b;
            }
            return;
          }
          // A given tokenizer's bos leads the sample; nothing predicts it.
          if (given && bos_id) add(std::span(&*bos_id, 1), false);
          for (const TextPiece& p : sample.pieces) add(tok->encode(p.text), p.trained);
          if (eot_id) add(std::span(&*eot_id, 1), true);
        });
    train_stream.finish();
    val_stream.finish();
    if (!bpe || given) {
      s.documents = pass2.documents;
      s.input_bytes = pass2.input_bytes;
      s.jsonl_samples = pass2.jsonl_samples;
    }
    if (train_w.ids.count() == 0) no_text();
    train_w.finish();
    val_w.finish();
    s.train_tokens = train_w.ids.count();
    s.val_tokens = val_w.ids.count();
    s.untrained_train_tokens = train_w.untrained;
    s.flags = flags;
  } catch (...) {
    if (made_out_dir) fs::remove(out, ec);  // only while still empty
    throw;
  }
  tok->save((out / kTokenizerFile).string());
  // A folder prepared by an older braid has tokenizer.json; left there it would be ambiguous.
  if (o.force) fs::remove(out / kLegacyTokenizerFile, ec);
  // Flags left from an earlier JSONL preparation would no longer match the shards.
  if (o.force && !s.flags) {
    fs::remove(out / kTrainFlagsFile, ec);
    fs::remove(out / kValFlagsFile, ec);
  }

  s.tokenizer = tok->kind();
  s.tokenizer_fingerprint = tok->fingerprint();
  s.vocab_size = tok->vocab_size();
  s.unigram_entropy_nats = unigram_entropy_of_counts(unigram);
  nlohmann::json meta = {{"format", "braid-prepare-v1"},
                         {"tokenizer", s.tokenizer},
                         {"tokenizer_fingerprint", s.tokenizer_fingerprint},
                         {"tokenizer_source", given ? nlohmann::json(o.tokenizer) : nlohmann::json(nullptr)},
                         {"vocab_size", s.vocab_size},
                         {"documents", s.documents},
                         {"input_bytes", s.input_bytes},
                         {"val_fraction", o.val_fraction},
                         {"document_separator", given ? "bos/eos of the tokenizer" : eot.empty() ? "newline" : "newline + eot"},
                         {"eot", eot_id ? nlohmann::json(tok->decode(std::span(&*eot_id, 1))) : nlohmann::json(nullptr)},
                         {"train_tokens", s.train_tokens},
                         {"val_tokens", s.val_tokens},
                         {"unigram_entropy_nats", s.unigram_entropy_nats},
                         {"jsonl_samples", s.jsonl_samples},
                         {"untrained_train_tokens", s.untrained_train_tokens},
                         {"flags", s.flags ? nlohmann::json(kTrainFlagsFile) : nlohmann::json(nullptr)}};
  write_file_atomic((out / "meta.json").string(), meta.dump(2) + "\n");
  s.total_s = seconds_since(t0);
  return s;
}

std::string format_prepare_summary(const PrepareSummary& s, const std::string& out_dir) {
  const double bytes_per_token =
      s.train_tokens + s.val_tokens > 0
          ? static_cast<double>(s.input_bytes) / static_cast<double>(s.train_tokens + s.val_tokens)
          : 0.0;
  return fmt::format(
      "prepared {} documents ({} bytes) into {}\n"
      "  tokenizer   {} vocab {} (trained in {:.2f} s), {:.2f} bytes/token\n"
      "  train.bin   {} tokens, unigram entropy {:.3f} nats/token\n"
      "  val.bin     {} tokens\n"
      "  total       {:.2f} s\n",
      s.documents, s.input_bytes, out_dir, s.tokenizer, s.vocab_size, s.tokenizer_train_s,
      bytes_per_token, s.train_tokens, s.unigram_entropy_nats, s.val_tokens, s.total_s) +
         (s.flags ? fmt::format("  loss mask   {} JSONL samples; {} of the train tokens (prompts) "
                                "not trained\n",
                                s.jsonl_samples, s.untrained_train_tokens)
                  : std::string());
}

}  // namespace braid
