// DataParallel: bucket lifecycle, late contributions and ZeRO-1's parameter shards.
#include "parallel/data_parallel.h"

#include "core/error.h"
#include "core/kernels/elementwise.h"

namespace braid {

DataParallel::DataParallel(ExecContext& ctx, const std::vector<Parameter*>& params,
                           const std::vector<Parameter*>& late, Communicator& dp,
                           const DataParallelOptions& options)
    : late_(late) {
  GradBucketOptions o = options.buckets;
  o.reduce_scatter = options.shard_optimizer && dp.size() > 1;
  buckets_ = std::make_unique<GradBuckets>(ctx, params, dp, o, late_);
}

void DataParallel::begin_step(int micro_batches) { buckets_->begin_step(micro_batches); }

void DataParallel::attach(MicroBatch& mb) { buckets_->attach(mb); }

void DataParallel::finish() {
  for (Parameter* p : late_)
    if (p->trainable) buckets_->grad_ready(*p);
  buckets_->finish();
}

void DataParallel::bind_parameters(ExecContext& ctx, DType compute) {
  BRAID_CHECK(sharded(), "DataParallel::bind_parameters: only ZeRO-1 keeps flat parameter buffers");
  BRAID_CHECK(params_.empty(), "DataParallel::bind_parameters called twice");
  ctx_ = &ctx;
  const auto& bs = buckets_->buckets();
  for (size_t b = 0; b < bs.size(); ++b) {
    ParamBuffer pb{ctx.zeros({bs[b].numel}, compute, MemCategory::Weights),
                   ctx.zeros({buckets_->shard_numel(b)}, compute, MemCategory::Communication)};
    for (const GradBuckets::Slot& s : bs[b].slots) {
      // The parameter's old storage goes with its last reference.
      Tensor view = pb.values.slice0(s.offset, s.offset + s.numel).view(s.param->value.shape());
      if (compute == s.param->value.dtype())
        view.copy_from(s.param->value);
      else
        cast(ctx, view, s.param->value);
      s.param->value = view;
    }
    params_.push_back(std::move(pb));
  }
}

Tensor DataParallel::param_shard(size_t b) const {
  BRAID_CHECK(b < params_.size(), "DataParallel::param_shard({}): {} parameter buffers", b,
              params_.size());
  const int64_t s0 = buckets_->shard_begin(b);
  return params_[b].values.slice0(s0, s0 + buckets_->shard_numel(b));
}

void DataParallel::gather_parameters() {
  BRAID_CHECK(ctx_ != nullptr, "DataParallel::gather_parameters before bind_parameters");
  std::vector<Work> works;
  for (size_t b = 0; b < params_.size(); ++b) {
    ParamBuffer& pb = params_[b];
    // Queued on the context (on a GPU, its stream, which the all-gather is ordered after): no
    // device-wide wait between one bucket's gather and the next one's copy.
    cast(*ctx_, pb.send, param_shard(b));
    works.push_back(comm().all_gather(pb.send, pb.values));
  }
  for (Work& w : works) w.wait();
}

}  // namespace braid
