// ParallelConfig validation.
#include "parallel/parallel_config.h"

#include "parallel/pipeline_schedule.h"

namespace braid {

void ParallelConfig::validate() const {
  if (dp && *dp < 1) config_error("dp", "dp is {}; expected auto or an integer >= 1", *dp);
  if (tp < 1) config_error("tp", "tp is {}; expected >= 1", tp);
  if (pp < 1) config_error("pp", "pp is {}; expected >= 1", pp);
  if (!(timeout_s > 0)) config_error("timeout_s", "timeout_s is {}; expected > 0", timeout_s);
  if (!(init_timeout_s > 0))
    config_error("init_timeout_s", "init_timeout_s is {}; expected > 0", init_timeout_s);
  if (!(bucket_mb > 0)) config_error("bucket_mb", "bucket_mb is {}; expected > 0", bucket_mb);
  if (!(first_bucket_mb > 0 && first_bucket_mb <= bucket_mb))
    config_error("first_bucket_mb", "first_bucket_mb is {}; expected > 0 and <= bucket_mb ({})",
                 first_bucket_mb, bucket_mb);
  DType t;
  if (!parse_dtype(allreduce_dtype, &t) || t == DType::I32)
    config_error("allreduce_dtype", "allreduce_dtype is '{}'; expected f32, bf16 or f16",
                 allreduce_dtype);
  ScheduleKind kind;
  if (!parse_schedule_kind(schedule, &kind))
    config_error("schedule", "schedule is '{}'; expected gpipe, 1f1b, interleaved-1f1b or zb-h1",
                 schedule);
  if (virtual_stages < 1)
    config_error("virtual_stages", "virtual_stages is {}; expected >= 1", virtual_stages);
  for (const int b : pp_split)
    if (b < 1)
      config_error("pp_split", "pp_split holds {}; expected a list of block counts >= 1", b);
  if (vocab_align < 1) config_error("vocab_align", "vocab_align is {}; expected >= 1", vocab_align);
  if (virtual_stages > 1 && kind != ScheduleKind::Interleaved1F1B)
    config_error("virtual_stages",
                 "virtual_stages is {} but schedule is {}; only interleaved-1f1b uses model chunks",
                 virtual_stages, schedule);
}

CommBackend resolve_comm_backend(CommBackend choice, bool on_gpu, bool nccl_built) {
  if (choice == CommBackend::Mpi) return CommBackend::Mpi;
  if (choice == CommBackend::Auto)
    return on_gpu && nccl_built ? CommBackend::Nccl : CommBackend::Mpi;
  if (!on_gpu)
    config_error("backend",
                 "backend is nccl but the run computes on the CPU (train.device); NCCL moves GPU "
                 "memory only: set train.device: cuda, or parallel.backend: mpi or auto");
  if (!nccl_built)
    config_error("backend",
                 "backend is nccl but this braid binary was built without NCCL; set "
                 "parallel.backend: mpi or auto, or rebuild with CUDA and NCCL installed");
  return CommBackend::Nccl;
}

DType ParallelConfig::allreduce_dtype_value() const {
  DType t = DType::F32;
  parse_dtype(allreduce_dtype, &t);
  return t;
}

}  // namespace braid
