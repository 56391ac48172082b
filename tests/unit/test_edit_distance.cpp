// edit_distance (launch/config/edit_distance.h): the one Levenshtein distance behind the "did you
// mean" of config keys and of subcommand names.
#include <gtest/gtest.h>

#include "launch/config/edit_distance.h"

namespace braid {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("train", "train"), 0u);
  EXPECT_EQ(edit_distance("trian", "train"), 2u);  // a swap is two edits
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("warmup", "warmup_steps"), 6u);
  EXPECT_EQ(edit_distance("lr", "LR"), 2u);  // bytes, case-sensitive
  EXPECT_EQ(edit_distance("flaw", "lawn"), edit_distance("lawn", "flaw"));
}

}  // namespace
}  // namespace braid
