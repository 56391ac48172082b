// CheckpointManager: save into a temp directory, manifest last, rename, move `latest`, prune.
#include "launch/io/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/atomic_file.h"
#include "core/checksum.h"
#include "core/input_guard.h"

namespace braid {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kTmpPrefix = ".tmp-";

// "step-00000100" -> 100; nullopt for anything else.
std::optional<int64_t> parse_dir_name(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "step-") != 0 || name.size() > 5 + 18)
    return std::nullopt;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

// Complete: the manifest parses and every file it lists (at least model and optimizer) is
// there with the recorded size. A step directory whose files are half gone (a kill -9 while an
// older one was pruned, a hand deletion) is therefore never taken for a checkpoint. Checksums
// are left to load(), which reads every byte.
bool is_complete(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / kManifest, ec)) return false;
  std::ifstream in(dir / kManifest, std::ios::binary);
  const nlohmann::json m = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!m.is_object() || !m.contains("files") || !m["files"].is_object()) return false;
  const nlohmann::json& files = m["files"];
  if (files.empty()) return false;
  if (!m.contains("shards") && (!files.contains(kModelFile) || !files.contains(kOptimizerFile)))
    return false;
  for (const auto& [name, rec] : files.items()) {
    if (name.find('/') != std::string::npos || !rec.is_object() || !rec.contains("bytes") ||
        !rec["bytes"].is_number_unsigned())
      return false;
    const uint64_t size = fs::file_size(dir / name, ec);
    if (ec || size != rec["bytes"].get<uint64_t>()) return false;
  }
  return true;
}

// Complete checkpoint directories in `dir`, oldest step first.
std::vector<std::pair<int64_t, std::string>> list_complete(const fs::path& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::optional<int64_t> step = parse_dir_name(e.path().filename().string());
    if (step && e.is_directory(ec) && is_complete(e.path()))
      out.emplace_back(*step, e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The tail of every "this checkpoint is damaged" message: what to do about it.
std::string corrupt_advice(const fs::path& ckpt) {
  std::string advice =
      "the checkpoint is corrupt; resume from an earlier one with checkpoint.resume=<path>";
  const std::optional<int64_t> self = parse_dir_name(ckpt.filename().string());
  std::optional<std::string> earlier;
  for (const auto& [step, p] : list_complete(ckpt.parent_path()))
    if (!self || step < *self) earlier = p;
  if (earlier) advice += fmt::format(" (e.g. checkpoint.resume={})", *earlier);
  return advice;
}

// The first tensor of `named` holding a NaN or an infinity, or "".
std::string first_non_finite(const std::vector<std::pair<std::string, Tensor>>& named) {
  for (const auto& [name, dev] : named) {
    const Tensor t = dev.to_host();  // a GPU run's tensors are checked on the host
    const int64_t n = t.numel();
    bool bad = false;
    if (t.dtype() == DType::F32) {
      const float* p = t.data<float>();
      for (int64_t i = 0; i < n && !bad; ++i) bad = !std::isfinite(p[i]);
    } else if (t.dtype() == DType::BF16) {
      const bf16* p = t.data<bf16>();
      for (int64_t i = 0; i < n && !bad; ++i) bad = !std::isfinite(bf16_to_float(p[i]));
    } else if (t.dtype() == DType::F16) {
      const f16* p = t.data<f16>();
      for (int64_t i = 0; i < n && !bad; ++i) bad = !std::isfinite(f16_to_float(p[i]));
    }
    if (bad) return name;
  }
  return "";
}

// A checkpoint is what a resume trusts: one holding NaN or inf would only resume a failure.
void refuse_non_finite(int64_t step, const std::vector<std::pair<std::string, Tensor>>& named) {
  const std::string bad = first_non_finite(named);
  if (!bad.empty())
    user_error(
        "not writing checkpoint step {}: {} holds a NaN or infinite value (training "
        "diverged); the earlier checkpoints are kept",
        step, bad);
}

// write_files without the check (save() checks before anything on disk changes).
nlohmann::json write_unchecked(const std::string& staging, int64_t step,
                               const std::vector<CheckpointFile>& files) {
  nlohmann::json out = {{"files", nlohmann::json::object()}, {"shards", nlohmann::json::object()}};
  const fs::path dir(staging);
  try {
    for (const CheckpointFile& f : files) {
      BRAID_CHECK(f.name.find('/') == std::string::npos, "checkpoint file name {}", f.name);
      save_safetensors((dir / f.name).string(), f.tensors, {}, f.widen_16bit);
      const FileDigest d = digest_file((dir / f.name).string(), kChecksumSha256);
      out["files"][f.name] = {{"bytes", d.bytes}, {"checksum", d.hex}};
      if (!f.shards.empty()) out["shards"][f.name] = f.shards;
    }
  } catch (const fs::filesystem_error& e) {
    user_error("cannot write checkpoint step {} in {}: {}", step, staging, e.what());
  }
  return out;
}

void remove_all_or_throw(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) user_error("cannot remove {}: {}", p.string(), ec.message());
}

// Bounded JSON nesting: a hostile manifest must not overflow the stack of the parser.
std::string read_checked_json_text(const fs::path& p) {
  std::string text = read_regular_file(p.string(), "checkpoint file");
  check_json_depth(text, "checkpoint file", p.string());
  return text;
}

}  // namespace

CheckpointManager::CheckpointManager(std::string run_dir, int keep_last)
    : dir_((fs::path(run_dir) / "checkpoints").string()), keep_last_(keep_last) {
  BRAID_CHECK(keep_last >= 1, "keep_last is {}; expected >= 1", keep_last);
}

std::string CheckpointManager::dir_name(int64_t step) { return fmt::format("step-{:08d}", step); }

std::vector<std::pair<int64_t, std::string>> CheckpointManager::list() const {
  return list_complete(dir_);
}

std::optional<std::string> CheckpointManager::latest() const {
  const fs::path pointer = fs::path(dir_) / "latest";
  std::error_code ec;
  if (fs::is_regular_file(pointer, ec)) {
    std::string name = read_checked_json_text(pointer);
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    if (parse_dir_name(name) && is_complete(fs::path(dir_) / name))
      return (fs::path(dir_) / name).string();
  }
  // No usable pointer (a crash between the rename and the pointer update, or a hand-deleted
  // directory): the newest complete directory is the next best answer.
  const auto all = list();
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

std::string CheckpointManager::staging_dir(int64_t step) const {
  return (fs::path(dir_) / (kTmpPrefix + dir_name(step))).string();
}

void CheckpointManager::begin_save(int64_t step) {
  BRAID_CHECK(step >= 0, "checkpoint step {} is negative", step);
  const fs::path root(dir_);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) user_error("cannot create checkpoint directory {}: {}", dir_, ec.message());
  // Leftovers of saves that died part-way; none of them is a complete checkpoint.
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.path().filename().string().rfind(kTmpPrefix, 0) == 0) remove_all_or_throw(e.path());
  }
  fs::create_directory(staging_dir(step), ec);
  if (ec) user_error("cannot create {}: {}", staging_dir(step), ec.message());
}

nlohmann::json CheckpointManager::write_files(const std::string& staging, int64_t step,
                                              const std::vector<CheckpointFile>& files) {
  for (const CheckpointFile& f : files) refuse_non_finite(step, f.tensors);
  return write_unchecked(staging, step, files);
}

std::string CheckpointManager::save(
    int64_t step, const std::vector<std::pair<std::string, Tensor>>& weights,
    const std::vector<std::pair<std::string, Tensor>>& optimizer_state,
    const nlohmann::json& state) {
  // Refuse non-finite values before anything on disk changes (each tensor read once for that).
  for (const auto* named : {&weights, &optimizer_state}) refuse_non_finite(step, *named);
  begin_save(step);
  nlohmann::json rec;
  try {
    rec = write_unchecked(staging_dir(step), step,
                          {{kModelFile, weights, nlohmann::json::object(), /*widen_16bit=*/true},
                           {kOptimizerFile, optimizer_state, nlohmann::json::object()}});
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staging_dir(step), ec);  // best effort; the next save removes it otherwise
    throw;
  }
  return commit_save(step, {rec}, state);
}

std::string CheckpointManager::commit_save(int64_t step, const std::vector<nlohmann::json>& records,
                                           const nlohmann::json& state) {
  const fs::path root(dir_);
  std::error_code ec;
  const std::string name = dir_name(step);
  const fs::path tmp = staging_dir(step);
  const fs::path final_dir = root / name;
  try {
    nlohmann::ordered_json files = nlohmann::ordered_json::object();
    nlohmann::json shards = nlohmann::json::object();
    for (const nlohmann::json& r : records) {
      for (const auto& [f, v] : r.at("files").items()) {
        BRAID_CHECK(!files.contains(f), "checkpoint file {} written twice", f);
        files[f] = v;
      }
      for (const auto& [f, v] : r.at("shards").items()) shards[f] = v;
    }
    nlohmann::ordered_json manifest = {{"format", "braid-checkpoint"},
                                       {"format_version", kCheckpointFormatVersion},
                                       {"step", step},
                                       {"checksum_algo", kChecksumSha256},
                                       {"files", files}};
    // A sharded layout: which files hold which kind, and how split tensors fit together.
    if (!files.contains(kModelFile) || !files.contains(kOptimizerFile) || !shards.empty())
      manifest["shards"] = shards;
    manifest["state"] = state;
    write_file_atomic((tmp / kManifest).string(), manifest.dump(2) + "\n");  // last: completes it

    if (fs::exists(final_dir)) {
      // Saving a step again (a resumed run passing an old step): swap, so a complete
      // directory of that name exists at every moment except between two renames.
      const fs::path old = root / (std::string(kTmpPrefix) + "replaced-" + name);
      fs::rename(final_dir, old);
      fs::rename(tmp, final_dir);
      remove_all_or_throw(old);
    } else {
      fs::rename(tmp, final_dir);
    }
    fsync_dir(dir_);
    write_file_atomic((root / "latest").string(), name + "\n");
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    user_error("cannot write checkpoint {}: {}", final_dir.string(), e.what());
  } catch (...) {
    fs::remove_all(tmp, ec);  // best effort; the next save removes it otherwise
    throw;
  }

  // Older checkpoints beyond keep_last. Newer steps (left by an abandoned run that was
  // resumed from further back) are not ours to delete.
  std::vector<std::pair<int64_t, std::string>> older;
  for (const auto& c : list())
    if (c.first < step) older.push_back(c);
  const size_t keep_older = static_cast<size_t>(keep_last_ - 1);
  if (older.size() > keep_older) {
    // Retire first, delete second: a rename out of the step-* namespace is atomic, so a kill
    // at any moment leaves either a complete checkpoint or a .tmp-* leftover (removed by the
    // next save), never a step directory with some of its files deleted.
    for (size_t i = 0; i < older.size() - keep_older; ++i) {
      const fs::path victim(older[i].second);
      const fs::path retired =
          root / (std::string(kTmpPrefix) + "retired-" + victim.filename().string());
      fs::rename(victim, retired, ec);
      if (ec) user_error("cannot retire old checkpoint {}: {}", victim.string(), ec.message());
    }
    fsync_dir(dir_);
    for (const auto& e : fs::directory_iterator(root))
      if (e.path().filename().string().rfind(std::string(kTmpPrefix) + "retired-", 0) == 0)
        remove_all_or_throw(e.path());
  }
  return final_dir.string();
}

LoadedCheckpoint CheckpointManager::load(const std::string& path) {
  const fs::path dir(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    user_error("checkpoint {} does not exist or is not a directory", path);
  const fs::path manifest_path = dir / kManifest;
  if (!fs::is_regular_file(manifest_path, ec))
    user_error(
        "{}: no {}; the checkpoint is incomplete (its save was interrupted); resume from "
        "an earlier one with checkpoint.resume=<path>",
        path, kManifest);

  const std::string mpath = manifest_path.string();
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(read_checked_json_text(manifest_path));
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    user_error("{}: not valid JSON ({}); {}", mpath, e.what(), corrupt_advice(dir));
  }
  if (!m.is_object() || !m.contains("format_version") || !m["format_version"].is_number_integer() ||
      !m.contains("step") || !m["step"].is_number_integer() || !m.contains("files") ||
      !m["files"].is_object())
    user_error("{}: missing or malformed format_version, step or files; {}", mpath,
               corrupt_advice(dir));
  const int version = m["format_version"].get<int>();
  if (version > kCheckpointFormatVersion)
    user_error(
        "{}: format_version {} is newer than this braid understands ({}); use a newer "
        "braid",
        mpath, version, kCheckpointFormatVersion);
  // SHA-256 since the manifest named it; braid-mix64-v1 in checkpoints written before.
  const nlohmann::json& algo_j =
      m.contains("checksum_algo") ? m["checksum_algo"] : nlohmann::json();
  const std::string algo = algo_j.is_string() ? algo_j.get<std::string>() : "";
  if (algo != kChecksumSha256 && algo != kChecksumMix64)
    user_error("{}: checksum_algo is '{}'; this braid checks '{}' (or '{}' in older checkpoints)",
               mpath, algo, kChecksumSha256, kChecksumMix64);

  const bool sharded = m.contains("shards");
  if (sharded && !m["shards"].is_object())
    user_error("{}: malformed shards section; {}", mpath, corrupt_advice(dir));
  for (const char* required : {kModelFile, kOptimizerFile})
    if (!sharded && !m["files"].contains(required))
      user_error("{}: does not list {}; {}", mpath, required, corrupt_advice(dir));
  for (const auto& [fname, rec] : m["files"].items()) {
    const fs::path file = dir / fname;
    if (fname.find('/') != std::string::npos || fname == ".." || !rec.is_object() ||
        !rec.contains("bytes") || !rec["bytes"].is_number_unsigned() || !rec.contains("checksum") ||
        !rec["checksum"].is_string())
      user_error("{}: malformed entry for file '{}'; {}", mpath, fname, corrupt_advice(dir));
    if (!fs::is_regular_file(file, ec))
      user_error("{}: missing (listed in the manifest); {}", file.string(), corrupt_advice(dir));
    const uint64_t want_bytes = rec["bytes"].get<uint64_t>();
    const std::string want_sum = rec["checksum"].get<std::string>();
    const uint64_t size = fs::file_size(file, ec);
    if (ec || size != want_bytes)
      user_error("{}: size is {} bytes but the manifest records {}; {}", file.string(), size,
                 want_bytes, corrupt_advice(dir));
    const FileDigest got = digest_file(file.string(), algo);
    if (got.hex != want_sum)
      user_error("{}: checksum mismatch (expected {}, actual {}, {}); {}", file.string(), want_sum,
                 got.hex, algo, corrupt_advice(dir));
  }

  LoadedCheckpoint out{path,
                       m["step"].get<int64_t>(),
                       m.contains("state") ? m["state"] : nlohmann::json::object(),
                       {},
                       {}};
  if (!sharded) {
    out.model = CheckpointTensors(SafetensorsFile::open((dir / kModelFile).string()));
    out.optimizer = CheckpointTensors(SafetensorsFile::open((dir / kOptimizerFile).string()));
    return out;
  }
  // Files named model-tp*-pp* and optimizer-tp*-pp*: each kind's shards.
  std::vector<std::pair<std::string, SafetensorsFile>> model, optimizer;
  for (const auto& [fname, rec] : m["files"].items()) {
    (void)rec;
    auto& kind = fname.rfind("model", 0) == 0 ? model : optimizer;
    if (fname.rfind("model", 0) != 0 && fname.rfind("optimizer", 0) != 0) continue;
    kind.emplace_back(fname, SafetensorsFile::open((dir / fname).string()));
  }
  if (model.empty()) user_error("{}: lists no model files; {}", mpath, corrupt_advice(dir));
  out.model = CheckpointTensors(std::move(model), m["shards"], path + " (model)");
  out.optimizer = CheckpointTensors(std::move(optimizer), m["shards"], path + " (optimizer)");
  return out;
}

void check_tensor_matches(const SafetensorsFile& file, const std::string& name,
                          const Shape& expected_shape, DType expected_dtype,
                          const std::string& file_description) {
  if (!file.contains(name))
    user_error(
        "{}: has no tensor {} but the model expects one of shape {}; the checkpoint was "
        "written for a different model config",
        file_description, name, shape_str(expected_shape));
  const SafetensorsInfo& info = file.info(name);
  if (info.shape != expected_shape)
    user_error(
        "{}: {} has shape {} but the model expects {}; the checkpoint was written for a "
        "different model config",
        file_description, name, shape_str(info.shape), shape_str(expected_shape));
  if (!info.dtype || *info.dtype != expected_dtype)
    user_error(
        "{}: {} has dtype {} but the model expects {}; the checkpoint was written with "
        "different precision settings",
        file_description, name, info.dtype_name, dtype_safetensors(expected_dtype));
}

}  // namespace braid
