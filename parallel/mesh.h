// Mesh: the (dp, tp, pp) rank layout as pure functions: coordinates and group memberships.
#pragma once

#include <string>
#include <vector>

namespace braid {

struct MeshCoord {
  int dp = 0;
  int tp = 0;
  int pp = 0;
  bool operator==(const MeshCoord&) const = default;
};

// The kinds of process groups every rank belongs to. `Embedding` is the pair of the first and
// last pipeline stage with the same (dp, tp) coordinates: GPT-2's tied token embedding lives on
// both and its gradient is summed over the pair.
enum class MeshGroup { Tp, Dp, Pp, Embedding };
const char* mesh_group_name(MeshGroup g);  // "tp", "dp", "pp", "embedding"

// Ranks are ordered tp fastest, then dp, then pp: rank = tp + TP * (dp + DP * pp), so a TP group
// is a run of consecutive ranks (one node) and a pipeline stage is a contiguous block.
class Mesh {
 public:
  // dp <= 0 means "auto": world_size / (tp * pp). Throws braid::UserError naming the degrees
  // and the world size when they do not multiply to world_size or one is < 1.
  static Mesh resolve(int dp, int tp, int pp, int world_size);

  int dp() const { return dp_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int world_size() const { return dp_ * tp_ * pp_; }

  MeshCoord coord(int rank) const;
  int rank(const MeshCoord& c) const;

  // World ranks of `rank`'s group of kind g, ordered by the coordinate along the group (the
  // group rank of a member is its index here). Embedding: {first stage, last stage} for ranks
  // on either of them (just {rank} when pp == 1), empty for ranks in the middle stages.
  std::vector<int> group(MeshGroup g, int rank) const;

  std::string str() const;  // "dp=2 tp=2 pp=1"

 private:
  Mesh(int dp, int tp, int pp) : dp_(dp), tp_(tp), pp_(pp) {}
  void check_rank(int rank) const;
  int dp_ = 1;
  int tp_ = 1;
  int pp_ = 1;
};

}  // namespace braid
