// Communicator: names of the reduction operations.
#include "parallel/communicator.h"

namespace braid {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
  }
  return "?";
}

}  // namespace braid
