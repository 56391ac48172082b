// The pipeline split: the best achievable most-expensive stage by dynamic programming, then
// the most even partition that meets it.
#include "parallel/stage_split.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace braid {

namespace {

double extra(int stage, int k, double first, double last) {
  return (stage == 0 ? first : 0.0) + (stage == k - 1 ? last : 0.0);
}

}  // namespace

std::vector<int> min_max_stage_blocks(int n, int k, const SplitCosts& costs) {
  BRAID_CHECK(k >= 1 && k <= n && costs.block > 0, "{} blocks over {} stages (block cost {})", n, k,
              costs.block);
  auto cost = [&](int j, int b) { return b * costs.block + extra(j, k, costs.first, costs.last); };
  const double inf = std::numeric_limits<double>::infinity();
  // worst[j][i]: the smallest possible most-expensive stage when stages j.. hold the last i
  // blocks (each stage >= 1 block).
  std::vector<std::vector<double>> worst(k + 1, std::vector<double>(n + 1, inf));
  worst[k][0] = 0;
  for (int j = k - 1; j >= 0; --j)
    for (int i = k - j; i <= n - j; ++i)
      for (int b = 1; b <= i - (k - j - 1); ++b)
        worst[j][i] = std::min(worst[j][i], std::max(cost(j, b), worst[j + 1][i - b]));
  // Among the partitions meeting that bound, the one with the smallest sum of squared stage
  // costs (the most even; with a cheap head, the even split), earlier stages taking more
  // blocks among equals.
  const double bound = worst[0][n] * (1 + 1e-12);
  std::vector<std::vector<double>> sq(k + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> pick(k + 1, std::vector<int>(n + 1, 0));
  sq[k][0] = 0;
  for (int j = k - 1; j >= 0; --j)
    for (int i = k - j; i <= n - j; ++i)
      for (int b = i - (k - j - 1); b >= 1; --b) {
        const double c = cost(j, b);
        if (c > bound || sq[j + 1][i - b] == inf) continue;
        const double v = c * c + sq[j + 1][i - b];
        if (v < sq[j][i] * (1 - 1e-12)) {
          sq[j][i] = v;
          pick[j][i] = b;
        }
      }
  std::vector<int> out;
  for (int j = 0, left = n; j < k; ++j) {
    out.push_back(pick[j][left]);
    left -= out.back();
  }
  return out;
}

}  // namespace braid
