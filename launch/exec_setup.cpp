// ExecContext construction from the environment.
#include "launch/exec_setup.h"

#include <cstdlib>

namespace braid {

GemmPlan gemm_plan_from_env() {
  GemmBackend backend = GemmBackend::OneDnn;
  if (const char* env = std::getenv("BRAID_GEMM"); env != nullptr && *env != '\0') {
    if (!parse_gemm_backend(env, &backend))
      user_error(
          "environment variable BRAID_GEMM='{}' is not a GEMM backend; expected one of "
          "onednn, openblas, reference (or unset for the automatic choice)",
          env);
  }
  return default_gemm_plan(backend);
}

std::unique_ptr<ExecContext> make_cpu_context(uint64_t seed) {
  ExecOptions o;
  o.gemm = gemm_plan_from_env();
  o.seed = seed;
  return std::make_unique<ExecContext>(std::move(o));
}

}  // namespace braid
