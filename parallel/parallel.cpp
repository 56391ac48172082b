// parallel/: communicators, the rank mesh and schedules arrive in part 2; this unit keeps the
// layer's library (and its MPI link) in the build until then.
#include <mpi.h>

namespace braid {

// True when the process runs under an MPI launcher that has initialised MPI.
bool mpi_is_initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

}  // namespace braid
