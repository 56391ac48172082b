// Mesh coordinates and groups.
#include "parallel/mesh.h"

#include <fmt/format.h>

#include "core/error.h"

namespace braid {

const char* mesh_group_name(MeshGroup g) {
  switch (g) {
    case MeshGroup::Tp:
      return "tp";
    case MeshGroup::Dp:
      return "dp";
    case MeshGroup::Pp:
      return "pp";
    case MeshGroup::Embedding:
      return "embedding";
  }
  return "?";
}

Mesh Mesh::resolve(int dp, int tp, int pp, int world_size) {
  BRAID_USER_CHECK(world_size >= 1, "world size is {}; expected >= 1", world_size);
  BRAID_USER_CHECK(tp >= 1, "parallel.tp is {}; expected >= 1", tp);
  BRAID_USER_CHECK(pp >= 1, "parallel.pp is {}; expected >= 1", pp);
  if (dp <= 0) {
    BRAID_USER_CHECK(world_size % (tp * pp) == 0,
                     "parallel.dp is auto but the world size {} is not divisible by tp * pp = "
                     "{} * {} = {}; launch a multiple of {} ranks or change tp/pp",
                     world_size, tp, pp, tp * pp, tp * pp);
    dp = world_size / (tp * pp);
  }
  BRAID_USER_CHECK(static_cast<long long>(dp) * tp * pp == world_size,
                   "parallel dp * tp * pp = {} * {} * {} = {} but the job has {} ranks; the "
                   "product must equal the world size (or set dp: auto)",
                   dp, tp, pp, static_cast<long long>(dp) * tp * pp, world_size);
  return Mesh(dp, tp, pp);
}

void Mesh::check_rank(int rank) const {
  BRAID_CHECK(rank >= 0 && rank < world_size(), "rank {} outside the mesh {} of {} ranks", rank,
              str(), world_size());
}

MeshCoord Mesh::coord(int rank) const {
  check_rank(rank);
  MeshCoord c;
  c.tp = rank % tp_;
  c.dp = (rank / tp_) % dp_;
  c.pp = rank / (tp_ * dp_);
  return c;
}

int Mesh::rank(const MeshCoord& c) const {
  BRAID_CHECK(c.dp >= 0 && c.dp < dp_ && c.tp >= 0 && c.tp < tp_ && c.pp >= 0 && c.pp < pp_,
              "coordinate (dp={}, tp={}, pp={}) outside the mesh {}", c.dp, c.tp, c.pp, str());
  return c.tp + tp_ * (c.dp + dp_ * c.pp);
}

std::vector<int> Mesh::group(MeshGroup g, int rank) const {
  MeshCoord c = coord(rank);
  std::vector<int> out;
  switch (g) {
    case MeshGroup::Tp:
      for (int i = 0; i < tp_; ++i) out.push_back(this->rank({c.dp, i, c.pp}));
      break;
    case MeshGroup::Dp:
      for (int i = 0; i < dp_; ++i) out.push_back(this->rank({i, c.tp, c.pp}));
      break;
    case MeshGroup::Pp:
      for (int i = 0; i < pp_; ++i) out.push_back(this->rank({c.dp, c.tp, i}));
      break;
    case MeshGroup::Embedding:
      if (pp_ == 1) {
        out.push_back(rank);
      } else if (c.pp == 0 || c.pp == pp_ - 1) {
        out.push_back(this->rank({c.dp, c.tp, 0}));
        out.push_back(this->rank({c.dp, c.tp, pp_ - 1}));
      }
      break;
  }
  return out;
}

std::string Mesh::str() const { return fmt::format("dp={} tp={} pp={}", dp_, tp_, pp_); }

}  // namespace braid
