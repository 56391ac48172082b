#!/usr/bin/env bash
# Sequence parallelism (parallel.sequence_parallel) in `braid train` against one rank on the
# same global batch, for one model family, over 10 steps: tp=2; tp=2 x pp=2 with 1f1b and
# zb-h1 (slices of the sequences cross the stage boundary); dp=2 x tp=2 with ZeRO-1;
# dp=2 x tp=2 x pp=2 (8 ranks, gpt2);
# tp=4 (Llama: kv heads replicated); full and selective activation checkpointing; bf16; LoRA on
# column- and row-parallel targets (tp=2, and tp=2 x pp=2 zb-h1); a tp=2 sequence-parallel
# checkpoint resumed on one rank; and the error for a seq_len that tp does not divide.
#   mp_seqpar.sh <mpirun> <braid> <workdir> <gpt2|llama>
# Tolerance as mp_train.sh (1e-6 relative per step loss: f32 summation order; the norms'
# gradients are now sums of per-rank partial sums) and mp_memsave.sh for bf16 (5e-4).
source "$(dirname "$0")/mp_common.bash"
sp=(--set parallel.sequence_parallel=true)

"$BRAID" train c.yaml > one.log
"$BRAID" train c.yaml --set run.name=one_sp "${sp[@]}" > one_sp.log  # tp = 1: no effect
exact one one_sp

mpi 2 --set run.name=tp2 --set parallel.tp=2 "${sp[@]}" > tp2.log
grep -q "sequence parallel" tp2.log || fail "no sequence-parallel note in the layout line"
same_losses one tp2 $TOL
for s in 1f1b zb-h1; do
  mpi 4 --set run.name=tp2pp2_$s --set parallel.tp=2 --set parallel.pp=2 \
      --set parallel.schedule=$s "${sp[@]}" > tp2pp2_$s.log
  same_losses one tp2pp2_$s $TOL
done
# With data parallelism and ZeRO-1 (the norms' summed gradients counted once in the norm).
mpi 4 --set run.name=dp2tp2_zero --set parallel.tp=2 --set data.grad_accum=2 --set optim.zero=1 \
    "${sp[@]}" > dp2tp2_zero.log
same_losses one dp2tp2_zero $TOL
if [ "$FAMILY" = llama ]; then
  mpi 4 --set run.name=tp4 --set parallel.tp=4 "${sp[@]}" > tp4.log
  same_losses one tp4 $TOL
else
  mpi 8 --set run.name=3d --set parallel.tp=2 --set parallel.pp=2 --set data.grad_accum=2 \
      "${sp[@]}" > 3d.log
  same_losses one 3d $TOL
  paste <(val_losses one) <(val_losses 3d) | awk -v r=$TOL '{ d = $1 - $2; if (d < 0) d = -d
    if (d / $1 > r) { print "val loss " $1 " vs " $2; bad = 1 } } END { exit bad }' \
    || fail "validation losses differ"
fi

# Activation checkpointing recomputes the gathers and scatters inside the backward.
for ck in full selective; do
  "$BRAID" train c.yaml --set run.name=one_$ck --set train.checkpointing=$ck > one_$ck.log
  mpi 2 --set run.name=tp2_$ck --set parallel.tp=2 --set train.checkpointing=$ck "${sp[@]}" \
      > tp2_$ck.log
  same_losses one_$ck tp2_$ck $TOL
done
"$BRAID" train c.yaml --set run.name=one_bf16 --set train.precision=bf16 > one_bf16.log
mpi 2 --set run.name=tp2_bf16 --set parallel.tp=2 --set train.precision=bf16 "${sp[@]}" > tp2_bf16.log
same_losses one_bf16 tp2_bf16 5e-4
# LoRA on column- and row-parallel targets: a row-parallel base's adapter update is scattered
# to the base's output slice, and B's per-slice gradients are summed over tp (zb-h1: deferred).
lora=(--set lora.rank=4 --set lora.alpha=8 --set 'lora.targets=[q,v,o,down]')
[ "$FAMILY" = gpt2 ] && lora=(--set lora.rank=4 --set lora.alpha=8 --set 'lora.targets=[c_attn,c_proj]')
"$BRAID" train c.yaml --set run.name=one_lora "${lora[@]}" > one_lora.log
mpi 2 --set run.name=tp2_lora --set parallel.tp=2 "${lora[@]}" "${sp[@]}" > tp2_lora.log
same_losses one_lora tp2_lora $TOL
mpi 4 --set run.name=tp2pp2_lora --set parallel.tp=2 --set parallel.pp=2 \
    --set parallel.schedule=zb-h1 "${lora[@]}" "${sp[@]}" > tp2pp2_lora.log
same_losses one_lora tp2pp2_lora $TOL

# A sequence-parallel checkpoint (norms written once) resumes on one rank: the same curve.
mpi 2 --set run.name=ck --set parallel.tp=2 --set train.steps=5 "${sp[@]}" > ck.log
"$BRAID" train c.yaml --set run.name=ck > ck_one.log
grep -q "resumed from .*step-00000005" ck_one.log || fail "one rank did not resume"
same_losses one ck $TOL

expect_fail "data.seq_len = 15 is not a multiple of parallel.tp = 2" \
  mpi_t 2 --set run.name=bad1 --set parallel.tp=2 --set data.seq_len=15 "${sp[@]}"
echo PASS
