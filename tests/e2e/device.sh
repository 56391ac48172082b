#!/usr/bin/env bash
# Device selection: `braid --version` says whether the binary has the CUDA backend (and which
# GPUs it can use); the training
# log's first line says which device a run uses and why; on a machine without a GPU (or a build
# without CUDA) `device: auto` trains on the CPU, and `device: cuda` (train, eval, generate)
# fails with the reason before anything is written. On a machine with a GPU the cuda case is
# the GPU tests' job (tests/gpu), so it is skipped here.
source "$(dirname "$0")/common.bash"
"$BRAID" --version | grep -q "CUDA backend: " || fail "--version does not say whether CUDA is built"
# A GPU as braid sees it (the CUDA runtime, not nvidia-smi: a driver too old for the runtime
# shows a GPU in nvidia-smi that braid cannot use).
gpu=0
if "$BRAID" --version | grep -q "CUDA backend: yes"; then
  "$BRAID" --version | grep -qE "^  GPUs: " || fail "--version does not say which GPUs are usable"
  "$BRAID" --version | grep -qE "^  GPUs: [0-9]+ visible" && gpu=1
fi
make_corpus
"$BRAID" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
write_config "$WORK/data" dev cfg.yaml
"$BRAID" train cfg.yaml > auto.log
want="device cpu (auto: "
[ $gpu = 1 ] && want="device cuda:0, "
grep -m1 "braid train:" auto.log | grep -qF "$want" ||
  fail "the header does not say which device auto chose and why: $(grep -m1 'braid train:' auto.log)"
"$BRAID" train cfg.yaml --set run.name=cpu --set train.device=cpu > cpu.log
grep -m1 "braid train:" cpu.log | grep -q "device cpu (train.device: cpu)" ||
  fail "device cpu not in the header: $(grep -m1 'braid train:' cpu.log)"
if [ $gpu = 1 ]; then
  echo "a GPU is visible: the cuda failures are not tested here"
  exit 0
fi
expect_fail "train.device: cuda, but" "$BRAID" train cfg.yaml --set run.name=gpu --set train.device=cuda
[ ! -e runs/gpu/checkpoints ] || fail "a refused cuda run wrote checkpoints"
expect_fail "--device: cuda, but" "$BRAID" eval runs/dev --device cuda
expect_fail "--device: cuda, but" "$BRAID" generate runs/dev --device cuda --tokens 3
expect_fail "train.device" "$BRAID" train cfg.yaml --set run.name=bad --set train.device=gpu
expect_fail "backend is nccl but train.device is cpu" "$BRAID" train cfg.yaml --set run.name=nccl \
  --set train.device=cpu --set parallel.backend=nccl
expect_fail "parallel.backend" "$BRAID" train cfg.yaml --set run.name=bad --set parallel.backend=gloo
echo "device selection ok"
