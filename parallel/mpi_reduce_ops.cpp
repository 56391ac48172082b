// User-defined MPI reductions for bf16 and f16: each combining step computes in f32 and rounds
// once, so the wire carries 2 bytes per element.
#include <fmt/format.h>

#include "core/dtype.h"
#include "core/error.h"
#include "parallel/mpi_communicator.h"

namespace braid {
namespace {

template <class T, float (*ToF)(T), T (*FromF)(float), bool kMax>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = ToF(a[i]), y = ToF(b[i]);
    b[i] = FromF(kMax ? (x > y ? x : y) : x + y);
  }
}

void check(int rc, const char* what) {
  BRAID_CHECK(rc == MPI_SUCCESS, "{} failed: {}", what, mpi_error_string(rc));
}

}  // namespace

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", rc);
  return std::string(buf, static_cast<size_t>(len));
}

void MpiReduceOps::create() {
  check(MPI_Op_create(&reduce16<bf16, bf16_to_float, float_to_bf16, false>, 1, &bf16_sum),
        "MPI_Op_create(bf16 sum)");
  check(MPI_Op_create(&reduce16<bf16, bf16_to_float, float_to_bf16, true>, 1, &bf16_max),
        "MPI_Op_create(bf16 max)");
  check(MPI_Op_create(&reduce16<f16, f16_to_float, float_to_f16, false>, 1, &f16_sum),
        "MPI_Op_create(f16 sum)");
  check(MPI_Op_create(&reduce16<f16, f16_to_float, float_to_f16, true>, 1, &f16_max),
        "MPI_Op_create(f16 max)");
}

void MpiReduceOps::free() {
  for (MPI_Op* op : {&bf16_sum, &bf16_max, &f16_sum, &f16_max})
    if (*op != MPI_OP_NULL) MPI_Op_free(op);
}

}  // namespace braid
