// Communicator: names of the reduction operations and of tensors in messages.
#include "parallel/communicator.h"

#include <fmt/format.h>

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

std::string tensor_desc(const Tensor& t) {
  return fmt::format("{}[{}]", dtype_name(t.dtype()), t.numel());
}

}  // namespace braid
