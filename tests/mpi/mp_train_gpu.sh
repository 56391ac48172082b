#!/usr/bin/env bash
# `braid train` on several GPUs over NCCL against one GPU (and one GPU against the CPU) on the
# same global batch, for one model family: dp=2, tp=2 (with sequence parallelism), pp=2 (1f1b),
# ZeRO-1 on dp=2, and with 4 GPUs dp=2 x tp=2 and tp=2 x pp=2; every rank on its own GPU (named
# in run.json). Exit 77 (skip) with the reason where fewer than 2 GPUs are visible.
#   mp_train_gpu.sh <mpirun> <braid> <workdir> <gpt2|llama>
# Tolerances: across layouts the sums of partial products and gradients run in other orders
# (NCCL's ring, not the CPU's) - 1e-5 relative on every step loss over 10 steps of the 4-block
# model; GPU vs CPU (TF32 off) 1e-4: both f32 with f32 accumulation, different kernels.
source "$(dirname "$0")/mp_common.bash"
gpus=0
if command -v nvidia-smi >/dev/null; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true); fi
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  visible=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
  [ "$visible" -lt "$gpus" ] && gpus=$visible
fi
if [ "$gpus" -lt 2 ]; then
  echo "skip: $gpus GPU(s) visible; the multi-GPU training tests need 2 or more"
  exit 77
fi
cuda=(--set train.device=cuda --set train.tf32=false)

"$BRAID" train c.yaml --set run.name=cpu --set train.device=cpu > cpu.log
"$BRAID" train c.yaml --set run.name=one "${cuda[@]}" > one.log
same_losses cpu one 1e-4

mpi 2 --set run.name=dp2 --set parallel.dp=2 --set data.grad_accum=2 "${cuda[@]}" > dp2.log
same_losses one dp2 1e-5
mpi 2 --set run.name=zero2 --set parallel.dp=2 --set data.grad_accum=2 --set optim.zero=1 \
  "${cuda[@]}" > zero2.log
same_losses one zero2 1e-5
mpi 2 --set run.name=tp2 --set parallel.tp=2 --set parallel.sequence_parallel=true \
  "${cuda[@]}" > tp2.log
same_losses one tp2 1e-5
mpi 2 --set run.name=pp2 --set parallel.pp=2 --set parallel.schedule=1f1b "${cuda[@]}" > pp2.log
same_losses one pp2 1e-5
python3 - <<'PY' || fail "run.json does not name a different GPU per rank"
import json
d = json.load(open("runs/dp2/run.json"))["attempts"][-1]["devices"]
assert len(d) == 2 and all(x["device"].startswith("cuda:") for x in d), d
assert d[0]["device"] != d[1]["device"] or d[0]["host"] != d[1]["host"], d
PY
if [ "$gpus" -ge 4 ]; then
  mpi 4 --set run.name=dp2tp2 --set parallel.dp=2 --set parallel.tp=2 --set data.grad_accum=2 \
    "${cuda[@]}" > dp2tp2.log
  same_losses one dp2tp2 1e-5
  mpi 4 --set run.name=tp2pp2 --set parallel.tp=2 --set parallel.pp=2 "${cuda[@]}" > tp2pp2.log
  same_losses one tp2pp2 1e-5
else
  echo "only $gpus GPUs: the 4-rank layouts are not run"
fi
echo PASS
