// The layers, enforced: every source file's includes are checked against one table of allowed
// directory edges, and CMake's links between the layer libraries against the same table. A new
// edge (data/ including optim/, the planner including a kernel) fails here; to allow one, change
// the table, and with it docs/architecture.md and the links in CMakeLists.txt.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// What the files of `folder` may include. `may`: prefixes of include paths (a folder ends in
// '/'; "" allows anything); `but_not`: prefixes refused even where `may` allows them. A file
// follows the rule of the longest folder that holds it; a folder with no rule fails.
struct Rule {
  std::string folder;
  std::vector<std::string> may;
  std::vector<std::string> but_not;
};

const std::vector<Rule>& layer_table() {
  static const std::vector<Rule> table = {
      {"core", {"core/"}, {}},
      {"core/kernels", {"core/"}, {"core/models/"}},  // kernels know no layers or models
      {"parallel", {"core/", "parallel/"}, {}},
      // optim/ sits above parallel/: ZeRO-1 shards the optimizer's state over the DP group.
      {"optim", {"core/", "parallel/", "optim/"}, {}},
      {"data", {"core/", "data/"}, {}},
      {"launch", {"core/", "parallel/", "optim/", "data/", "launch/"}, {}},
      // The planner: formulas over configs and tables. Nothing that runs kernels or models,
      // allocates tensors or owns process state (the probes of --calibrate do, in
      // launch/calibrate/); from parallel/ only the pipeline split it shares with the trainer.
      {"launch/plan",
       {"core/", "launch/", "parallel/stage_split.h"},
       {"core/kernels/", "core/models/", "core/tensor", "core/memory", "core/profile",
        "core/random", "launch/calibrate/"}},
      // The precompiled header of the libraries (cmake/braid_pch.h): standard and package
      // headers only, no braid header, since every file of every layer starts from it.
      {"cmake", {}, {}},
      {"tools", {""}, {}},
      {"tests", {""}, {}},
  };
  return table;
}

// Headers the build generates, as the tree path they count as (the folder whose library has
// them on its include path).
const std::map<std::string, std::string> kGenerated = {
    {"braid_build_info.h", "launch/braid_build_info.h"}};

// The layer libraries of CMakeLists.txt and the folder each holds.
const std::map<std::string, std::string> kLibraries = {{"braid_core", "core"},
                                                       {"braid_parallel", "parallel"},
                                                       {"braid_optim", "optim"},
                                                       {"braid_data", "data"},
                                                       {"braid_launch", "launch"}};

const Rule* rule_for(const std::string& path) {
  const Rule* best = nullptr;
  for (const Rule& r : layer_table())
    if (path.rfind(r.folder + "/", 0) == 0 && (!best || r.folder.size() > best->folder.size()))
      best = &r;
  return best;
}

bool starts_with_any(const std::string& s, const std::vector<std::string>& prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](const std::string& p) { return s.rfind(p, 0) == 0; });
}

struct Include {
  std::string name;
  bool quoted = true;
  int line = 0;
};

// The #include lines of a file's text.
std::vector<Include> includes_of(const std::string& text) {
  std::vector<Include> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] != '#') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0) continue;
    i = line.find_first_not_of(" \t", i + 7);
    if (i == std::string::npos || (line[i] != '"' && line[i] != '<')) continue;
    const size_t end = line.find(line[i] == '"' ? '"' : '>', i + 1);
    if (end == std::string::npos) continue;
    out.push_back({line.substr(i + 1, end - i - 1), line[i] == '"', n});
  }
  return out;
}

// The tree path an include of `file` names: next to the file first (quoted includes only), then
// from the root (the include path every target has), then a generated header; "" when it names
// no file of the tree (a system or package header).
std::string resolve(const fs::path& root, const std::string& file, const Include& inc) {
  auto inside = [&](const fs::path& p) -> std::string {
    const fs::path rel = p.lexically_normal().lexically_relative(root);
    if (rel.empty() || *rel.begin() == "..") return "";
    return fs::is_regular_file(p) ? rel.generic_string() : "";
  };
  if (inc.quoted)
    if (std::string p = inside(root / fs::path(file).parent_path() / inc.name); !p.empty())
      return p;
  if (std::string p = inside(root / inc.name); !p.empty()) return p;
  if (auto it = kGenerated.find(inc.name); it != kGenerated.end()) return it->second;
  return "";
}

// Why the table refuses the includes of `file` (a tree path) with `text`: one line each.
std::vector<std::string> violations(const fs::path& root, const std::string& file,
                                    const std::string& text) {
  std::vector<std::string> out;
  const Rule* rule = rule_for(file);
  if (!rule) return {file + ": its folder has no rule in the layer table"};
  for (const Include& inc : includes_of(text)) {
    const std::string target = resolve(root, file, inc);
    const std::string where = file + ":" + std::to_string(inc.line) + ": ";
    if (target.empty()) {
      if (inc.quoted)
        out.push_back(where + "#include \"" + inc.name + "\" names no file of the tree");
      continue;
    }
    if (!starts_with_any(target, rule->may) || starts_with_any(target, rule->but_not))
      out.push_back(where + "includes " + target + ", but " + rule->folder + "/ may not use it");
  }
  return out;
}

bool is_source(const fs::path& p) {
  static const std::set<std::string> exts = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"};
  return exts.count(p.extension().string()) > 0;
}

// A build tree or a Python environment inside the checkout: not the project's sources.
bool foreign_tree(const fs::path& dir) {
  return fs::exists(dir / "CMakeCache.txt") || fs::exists(dir / "pyvenv.cfg");
}

// Every source file of the tree (hidden folders, build trees and Python environments left out),
// as tree paths.
std::vector<std::string> source_files(const fs::path& root) {
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    if (it->is_directory() &&
        (it->path().filename().string().front() == '.' || foreign_tree(it->path()))) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && is_source(it->path()))
      out.push_back(it->path().lexically_relative(root).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const fs::path kRoot = fs::path(BRAID_SOURCE_DIR);

TEST(Layering, EveryIncludeFollowsTheTable) {
  const std::vector<std::string> files = source_files(kRoot);
  std::map<std::string, int> per_folder;
  for (const std::string& f : files) {
    ++per_folder[f.substr(0, f.find('/'))];
    for (const std::string& v : violations(kRoot, f, read(kRoot / f))) ADD_FAILURE() << v;
  }
  // The scan saw the tree (not an empty or wrong directory).
  for (const char* folder : {"core", "parallel", "optim", "data", "launch", "tools", "tests"})
    EXPECT_GE(per_folder[folder], 5) << "too few sources found in " << (kRoot / folder);
}

TEST(Layering, TheCheckSeesANewEdge) {
  auto refused = [](const std::string& file, const std::string& inc) {
    return violations(kRoot, file, "#include \"" + inc + "\"\n").size();
  };
  EXPECT_EQ(refused("data/loader.cpp", "optim/adamw.h"), 1u);
  EXPECT_EQ(refused("parallel/grad_buckets.cpp", "optim/adamw.h"), 1u);
  EXPECT_EQ(refused("optim/adamw.cpp", "data/loader.h"), 1u);
  EXPECT_EQ(refused("parallel/mesh.cpp", "launch/config/config.h"), 1u);
  EXPECT_EQ(refused("core/tensor.cpp", "parallel/communicator.h"), 1u);
  EXPECT_EQ(refused("core/kernels/gemm.cpp", "core/models/block.h"), 1u);
  EXPECT_EQ(refused("launch/plan/search.cpp", "core/kernels/gemm.h"), 1u);
  EXPECT_EQ(refused("launch/plan/search.cpp", "optim/adamw.h"), 1u);
  EXPECT_EQ(refused("launch/plan/search.cpp", "parallel/mesh.h"), 1u);
  EXPECT_EQ(refused("launch/plan/search.cpp", "launch/calibrate/probes.h"), 1u);
  EXPECT_EQ(refused("launch/x.cpp", "tools/nothing_here.h"), 1u);  // names no file
  EXPECT_EQ(refused("serve/x.cpp", "core/error.h"), 1u);           // a folder without a rule
  // Angle brackets are no way around it; relative paths are resolved first.
  EXPECT_EQ(violations(kRoot, "data/loader.cpp", "#  include <optim/adamw.h>").size(), 1u);
  EXPECT_EQ(refused("data/loader.cpp", "../optim/adamw.h"), 1u);
  // What the table allows.
  EXPECT_EQ(refused("parallel/tp_regions.cpp", "core/models/block.h"), 0u);
  EXPECT_EQ(refused("optim/zero_adamw.cpp", "parallel/data_parallel.h"), 0u);
  EXPECT_EQ(refused("launch/plan/config_input.cpp", "parallel/stage_split.h"), 0u);
  EXPECT_EQ(refused("launch/plan/search.cpp", "core/model_config.h"), 0u);
  EXPECT_EQ(refused("launch/report/run_record.cpp", "braid_build_info.h"), 0u);
  EXPECT_EQ(refused("tests/unit/x.cpp", "model_test_util.h"), 0u);
  EXPECT_EQ(
      violations(kRoot, "data/loader.cpp", "#include <vector>\n// #include \"optim/a.h\"").size(),
      0u);
}

// CMakeLists.txt without comments.
std::string cmake_text() {
  std::istringstream in(read(kRoot / "CMakeLists.txt"));
  std::string out, line;
  while (std::getline(in, line)) out += line.substr(0, line.find('#')) + "\n";
  return out;
}

// The words of each `command(first ...)` call in `text`, keyed by its first word.
std::map<std::string, std::vector<std::string>> calls(const std::string& text,
                                                      const std::string& command) {
  std::map<std::string, std::vector<std::string>> out;
  for (size_t at = text.find(command + "("); at != std::string::npos;
       at = text.find(command + "(", at + 1)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_'))
      continue;
    const size_t open = at + command.size() + 1, close = text.find(')', open);
    std::istringstream args(text.substr(open, close - open));
    std::vector<std::string> words;
    for (std::string w; args >> w;) words.push_back(w);
    if (!words.empty()) {
      auto& v = out[words.front()];
      v.insert(v.end(), words.begin() + 1, words.end());
    }
  }
  return out;
}

// The folders `folder`'s rule lets it include whole (its own left out).
std::set<std::string> allowed_layers(const std::string& folder) {
  std::set<std::string> out;
  const Rule* rule = rule_for(folder + "/x.cpp");
  for (const auto& [lib, f] : kLibraries)
    if (f != folder && starts_with_any(f + "/", rule->may)) out.insert(f);
  return out;
}

TEST(Layering, CMakeLinksFollowTheTable) {
  const std::string text = cmake_text();
  const auto links = calls(text, "target_link_libraries");
  const auto globs = calls(text, "braid_glob");
  const auto libs = calls(text, "add_library");
  for (const auto& [lib, folder] : kLibraries) {
    ASSERT_TRUE(links.count(lib)) << "CMakeLists.txt has no target_link_libraries(" << lib;
    std::set<std::string> linked;
    for (const std::string& w : links.at(lib))
      if (kLibraries.count(w)) linked.insert(kLibraries.at(w));
    EXPECT_EQ(linked, allowed_layers(folder))
        << lib << " must link exactly the layer libraries the table lets " << folder << "/ include";
    // Its sources come from its own folder.
    ASSERT_TRUE(libs.count(lib)) << "CMakeLists.txt has no add_library(" << lib;
    for (const std::string& w : libs.at(lib)) {
      if (w.rfind("${", 0) != 0) continue;
      const std::string var = w.substr(2, w.size() - 3);
      ASSERT_TRUE(globs.count(var)) << lib << "'s sources " << w << " are not a braid_glob";
      for (const std::string& dir : globs.at(var))
        EXPECT_TRUE(dir == folder || dir.rfind(folder + "/", 0) == 0)
            << lib << " compiles " << dir << "/, outside " << folder << "/";
    }
  }
}

}  // namespace
