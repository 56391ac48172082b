// The collectives of tensor and sequence parallelism as small modules that the placement pass
// (tensor_parallel.h) puts into the core layers' region slots (SelfAttention's and MLP's
// input region, a row-parallel Linear's or a vocab-sharded Embedding's output region, LoRA's
// regions), as Megatron's mappings between the tensor-parallel regions:
//
//   entering a region (the input every rank's column shard reads):
//     CopyToRegion           forward: identity        backward: all-reduce (sum)
//     GatherSequence         forward: all-gather      backward: reduce-scatter (sequence slices)
//   leaving a region (the partial sums of the row shards):
//     ReduceFromRegion       forward: all-reduce      backward: identity
//     ScatterSequence        forward: reduce-scatter  backward: all-gather
//
// Sums run in the tensor's dtype (the layers hand f32 partial sums to the exits; the input
// gradients arrive in the activations' dtype). GatherSequence keeps the slice instead of the
// gathered tensor for a backward that stashes it (MicroBatch::recompute_later): the backward
// gathers it again. Collective: every rank of the group runs the same regions in order.
#pragma once

#include <memory>

#include "core/module.h"
#include "parallel/communicator.h"

namespace braid {

class CopyToRegion final : public Module {
 public:
  CopyToRegion(std::string path, Communicator& tp) : Module(std::move(path)), tp_(tp) {}
  Tensor forward(const Tensor& x, MicroBatch& mb) override;
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;

 private:
  Communicator& tp_;
};

class ReduceFromRegion final : public Module {
 public:
  ReduceFromRegion(std::string path, Communicator& tp) : Module(std::move(path)), tp_(tp) {}
  Tensor forward(const Tensor& x, MicroBatch& mb) override;
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;

 private:
  Communicator& tp_;
};

class GatherSequence final : public Module {
 public:
  GatherSequence(std::string path, Communicator& tp) : Module(std::move(path)), tp_(tp) {}
  Tensor forward(const Tensor& x, MicroBatch& mb) override;
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;

 private:
  Communicator& tp_;
};

class ScatterSequence final : public Module {
 public:
  ScatterSequence(std::string path, Communicator& tp) : Module(std::move(path)), tp_(tp) {}
  Tensor forward(const Tensor& x, MicroBatch& mb) override;
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;

 private:
  Communicator& tp_;
};

// The entry and exit for a layout: with sequence parallelism the sequence gather/scatter pair,
// else the copy/reduce pair. `path` names the slot's module (for find and error messages).
std::unique_ptr<Module> enter_region(const std::string& path, Communicator& tp,
                                     bool sequence_parallel);
std::unique_ptr<Module> exit_region(const std::string& path, Communicator& tp,
                                    bool sequence_parallel);

}  // namespace braid
