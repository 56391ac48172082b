// Levenshtein distance over bytes, for "did you mean" suggestions (config keys and sections,
// subcommand names).
#pragma once

#include <cstddef>
#include <string_view>

namespace braid {

// The fewest single-byte insertions, deletions and substitutions that turn a into b.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace braid
