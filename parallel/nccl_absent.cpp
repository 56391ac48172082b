// Builds without NCCL: parallel.backend nccl is refused with the reason.
#include "core/error.h"
#include "parallel/nccl_communicator.h"

namespace braid {

bool nccl_built() { return false; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, const NcclCommOptions&) {
  user_error(
      "this braid binary was built without NCCL (no CUDA backend, or nccl.h/libnccl not found "
      "at configure time); use parallel.backend: mpi, or rebuild where CUDA and NCCL are "
      "installed");
}

}  // namespace braid
