// The planner is pure (issue 7, point 7): launch/plan/ computes from configs and tables and
// includes nothing that runs kernels, models, optimizers or allocates tensors; the calibrator that
// does lives in launch/calibrate/, which main() hands to the plan command.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Headers whose code runs kernels or models, or owns process state the planner must not touch.
const std::vector<std::string> kForbidden = {"core/kernels/", "core/models/",     "core/tensor",
                                             "core/memory",   "core/profile",     "core/random",
                                             "optim/",        "parallel/",        "data/",
                                             "tools/",        "launch/calibrate/"};

// The quoted includes of `text` that start with a forbidden prefix.
std::vector<std::string> forbidden_includes(const std::string& text) {
  std::vector<std::string> bad;
  static const std::regex inc(R"re(#\s*include\s*"([^"]+)")re");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), inc); it != std::sregex_iterator();
       ++it) {
    const std::string path = (*it)[1].str();
    for (const std::string& f : kForbidden)
      if (path.rfind(f, 0) == 0) bad.push_back(path);
  }
  return bad;
}

}  // namespace

TEST(PlanPurity, TheCheckSeesAForbiddenInclude) {
  EXPECT_EQ(
      forbidden_includes("#include \"core/kernels/gemm.h\"\n#include \"core/error.h\"\n").size(),
      1u);
  EXPECT_EQ(forbidden_includes("#  include \"optim/adamw.h\"").size(), 1u);
  EXPECT_TRUE(forbidden_includes("#include \"core/model_config.h\"\n#include <vector>\n").empty());
}

TEST(PlanPurity, LaunchPlanIncludesNoKernelsModelsOrOptimizer) {
  const fs::path dir = fs::path(BRAID_SOURCE_DIR) / "launch" / "plan";
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".h" && ext != ".cpp") continue;
    std::ifstream in(e.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ++files;
    for (const std::string& bad : forbidden_includes(text))
      ADD_FAILURE()
          << e.path().filename() << " includes \"" << bad
          << "\"; the planner computes from configs and tables only (calibration code goes in "
             "launch/calibrate/)";
  }
  EXPECT_GE(files, 20) << "found too few planner sources in " << dir;
}

TEST(PlanPurity, TheCalibratorIsNotPartOfThePlannerLibrary) {
  // The probes live in launch/calibrate/; they must not come back into the planner.
  const fs::path dir = fs::path(BRAID_SOURCE_DIR) / "launch" / "plan";
  for (const char* f : {"probes.cpp", "probes.h", "calibrate.cpp"})
    EXPECT_FALSE(fs::exists(dir / f)) << f;
  EXPECT_TRUE(fs::exists(fs::path(BRAID_SOURCE_DIR) / "launch" / "calibrate" / "probes.cpp"));
}
