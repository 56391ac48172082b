// prepare(): read documents, split, train/apply the tokenizer, write the four output files.
#include "data/prepare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/file_util.h"
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
    user_error("--out '{}' is not empty; pass --force to overwrite tokenizer.json, train.bin, "
               "val.bin and meta.json there, or choose an empty or new folder", o.out_dir);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  if (ids.empty()) return 0;
  std::vector<int64_t> counts(static_cast<size_t>(vocab_size), 0);
  for (int32_t id : ids) ++counts[static_cast<size_t>(id)];
  const double n = static_cast<double>(ids.size());
  double h = 0;
  for (int64_t c : counts)
    if (c > 0) h -= (c / n) * std::log(c / n);
  return h;
}

PrepareSummary prepare(const PrepareOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.tokenizer != "byte" && o.tokenizer != "bpe")
    user_error("--tokenizer is '{}'; expected byte or bpe", o.tokenizer);
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
  PrepareSummary s;
  std::string train_text, val_text;
  for (const std::string& f : files) {
    std::string doc = read_file_bytes(f, "input file");
    if (doc.empty()) continue;
    if (doc.back() != '\n') doc.push_back('\n');
    ++s.documents;
    s.input_bytes += static_cast<int64_t>(doc.size());
    auto [train, val] = split_document(doc, o.val_fraction);
    train_text += train;
    val_text += val;
  }
  if (train_text.empty())
    user_error("the inputs ({} files) hold no text; expected non-empty text files", files.size());

  std::unique_ptr<Tokenizer> tok;
  const auto t_tok = std::chrono::steady_clock::now();
  if (o.tokenizer == "byte") {
    tok = std::make_unique<ByteTokenizer>();
  } else {
    std::vector<std::string> texts{train_text};
    tok = std::make_unique<BpeTokenizer>(train_bpe(texts, o.vocab_size ? o.vocab_size : 512));
  }
  s.tokenizer_train_s = seconds_since(t_tok);
  const std::vector<int32_t> train_ids = tok->encode(train_text);
  const std::vector<int32_t> val_ids = tok->encode(val_text);

  fs::create_directories(o.out_dir);
  const fs::path out(o.out_dir);
  tok->save((out / "tokenizer.json").string());
  write_shard((out / "train.bin").string(), train_ids, tok->vocab_size());
  write_shard((out / "val.bin").string(), val_ids, tok->vocab_size());

  s.tokenizer = tok->kind();
  s.vocab_size = tok->vocab_size();
  s.train_tokens = static_cast<int64_t>(train_ids.size());
  s.val_tokens = static_cast<int64_t>(val_ids.size());
  s.unigram_entropy_nats = unigram_entropy(train_ids, s.vocab_size);
  nlohmann::json meta = {{"format", "braid-prepare-v1"},
                         {"tokenizer", s.tokenizer},
                         {"vocab_size", s.vocab_size},
                         {"documents", s.documents},
                         {"input_bytes", s.input_bytes},
                         {"val_fraction", o.val_fraction},
                         {"document_separator", "newline"},
                         {"train_tokens", s.train_tokens},
                         {"val_tokens", s.val_tokens},
                         {"unigram_entropy_nats", s.unigram_entropy_nats}};
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
      bytes_per_token, s.train_tokens, s.unigram_entropy_nats, s.val_tokens, s.total_s);
}

}  // namespace braid
