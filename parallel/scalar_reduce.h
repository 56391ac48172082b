// Exact reductions of a few host scalars over a group (losses, token counts, squared norms).
#pragma once

#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace braid {

// Element-wise sum over the group's members of `values` (same length on every member), in
// double and in group-rank order, so every member gets the same bits whatever the backend's
// reduction order: the values are all-gathered as raw bytes and summed here. Blocks.
std::vector<double> all_sum_doubles(Communicator& comm, const std::vector<double>& values);

// Every member's string, in group-rank order, on group rank 0 (the others get an empty
// vector). Collective; blocks.
std::vector<std::string> gather_strings(Communicator& comm, const std::string& mine);

// Element-wise max over the members of small integer flags (same length everywhere). Blocks.
std::vector<int> all_max_ints(Communicator& comm, const std::vector<int>& values);

}  // namespace braid
