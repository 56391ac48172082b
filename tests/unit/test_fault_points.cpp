// --test-fault values (launch/train/fault_points.h): the two faults and their defaults, every malformed
// form refused with the flag named, and fail_at_step firing on its rank and step only.
#include <gtest/gtest.h>

#include "core/error.h"
#include "launch/train/fault_points.h"

namespace braid {
namespace {

TEST(FaultPoints, NoneWithoutTheFlag) { EXPECT_TRUE(parse_test_faults({}).empty()); }

TEST(FaultPoints, ParsesBothFaults) {
  const FaultPoints f =
      parse_test_faults({"fail_at_step=1:3:kill_at_save", "overflow_at_step=8:1"});
  EXPECT_FALSE(f.empty());
  EXPECT_EQ(f.fail_rank, 1);
  EXPECT_EQ(f.fail_step, 3);
  EXPECT_EQ(f.fail_mode, "kill_at_save");
  EXPECT_EQ(f.overflow_step, 8);
  EXPECT_EQ(f.overflow_dp_rank, 1);
  const FaultPoints d = parse_test_faults({"fail_at_step=0:2", "overflow_at_step=5"});
  EXPECT_EQ(d.fail_mode, "throw");
  EXPECT_EQ(d.overflow_dp_rank, 0);
}

TEST(FaultPoints, RefusesMalformedValues) {
  for (const char* bad :
       {"fail_at_step=1", "fail_at_step=1:0", "fail_at_step=-1:3", "fail_at_step=1:3:boom",
        "fail_at_step=1:3:kill:x", "fail_at_step=1:3x", "overflow_at_step=", "overflow_at_step=0",
        "overflow_at_step=3:-1", "overflow_at_step= 3", "overflow_at_step", "fail_at_stp=1:3"}) {
    try {
      parse_test_faults({bad});
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--test-fault ") + bad), std::string::npos)
          << e.what();
    }
  }
}

TEST(FaultPoints, FailsOnItsRankAndStepOnly) {
  const FaultPoints f = parse_test_faults({"fail_at_step=1:3"});
  EXPECT_NO_THROW(maybe_fail(f, 0, 3));
  EXPECT_NO_THROW(maybe_fail(f, 1, 2));
  EXPECT_NO_THROW(maybe_fail(f, 1, 3, /*saving=*/true));  // throw is not a checkpoint fault
  EXPECT_THROW(maybe_fail(f, 1, 3), Error);
  EXPECT_NO_THROW(maybe_fail(FaultPoints{}, 0, 1));
}

}  // namespace
}  // namespace braid
