#!/usr/bin/env bash
# `braid train` with optim.name adamw8bit under mpirun: ZeRO-1 against plain data parallelism
# (bit for bit: every rank holds whole 2048-blocks of the 8-bit moments), its optimizer memory,
# resume from ZeRO-1 checkpoints (same layout: bit for bit; one rank: within DP_TOL), tensor
# parallelism against one rank (within TP_TOL), tp resume, dp=2 x tp=2 with ZeRO-1, and the
# refusal to resume 8-bit moments under another tensor-parallel size.
#   adamw8bit_train.sh <mpirun> <braid> <workdir>
# DP_TOL: data parallelism sums per-rank gradients (f32 order differs from one rank's, ~1e-8);
# an 8-bit moment code can then round the other way, which moves later losses more than f32
# moments would. TP_TOL: under tp = 2 each rank quantises its own part of a split matrix, so
# the blocks (and their absmax) differ from one rank's: a different, equally fine quantisation.
source "$(dirname "$0")/dp_common.bash"
DP_TOL=1e-5
TP_TOL=2e-4
# A GPT-2 whose matrices are 8-bit under tp = 1 and tp = 2 (the attention output, 64 x 64, has
# 4096 elements whole and keeps f32 moments when split).
cat > c.yaml <<YAML
run: {name: one, dir: $WORK/runs}
model: {family: gpt2, vocab_size: 256, context_length: 32, n_layer: 2, n_embd: 64, n_head: 4}
data: {dir: $WORK/data, micro_batch: 4, seq_len: 32, grad_accum: 4, seed: 3, prefetch: 2}
optim: {name: adamw8bit, lr: 0.003, min_lr: 0.0003, warmup_steps: 2, decay: cosine, decay_steps: 20}
train: {steps: 20, log_interval: 1, eval_interval: 10, eval_batches: 2, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 10, keep_last: 3, resume: auto}
parallel: {bucket_mb: 0.05, first_bucket_mb: 0.02, timeout_s: 60, vocab_align: 3}
YAML

"$BRAID" train c.yaml > one.log
"$BRAID" train c.yaml --set run.name=one_adamw --set optim.name=adamw > one_adamw.log
cmp -s <(losses one) <(losses one_adamw) && fail "adamw8bit gave AdamW's losses"

# ZeRO-1 equals plain DP bit for bit; both follow one rank.
mpi 2 --set run.name=d2 --set data.grad_accum=2 > d2.log
mpi 2 --set run.name=z2 --set data.grad_accum=2 --set optim.zero=1 > z2.log
exact d2 z2
same_losses one d2 $DP_TOL
grep -q "ZeRO-1: 8-bit moments sharded over 2 DP ranks" z2.log || fail "no ZeRO-1 line"

# Optimizer memory per rank: about half of plain DP's on 2 ranks (codes, absmax and the small
# f32 moments of each rank's whole blocks; the alignment pads at most 2047 per parameter).
opt_mib() { grep '"event":"train"' "runs/$1/metrics.jsonl" | tail -1 | sed 's/.*"optimizer":\([0-9.e+-]*\).*/\1/'; }
wide=(--set model.n_embd=128 --set model.n_layer=4 --set train.steps=2 --set data.grad_accum=1
      --set parallel.bucket_mb=25 --set parallel.first_bucket_mb=1)
mpi 2 --set run.name=mem "${wide[@]}" > mem.log
mpi 2 --set run.name=memz "${wide[@]}" --set optim.zero=1 > memz.log
awk -v z="$(opt_mib memz)" -v d="$(opt_mib mem)" 'BEGIN { r = z / d
  printf "adamw8bit optimizer MiB per rank: zero1 %s, plain %s, ratio %.3f\n", z, d, r
  exit !(r > 0.45 && r < 0.6) }' || fail "ZeRO-1 adamw8bit optimizer memory is not about 1/2"

# Resume: ZeRO-1 into ZeRO-1 (bit for bit), and ZeRO-1 into one rank (its pieces put together).
mpi 2 --set run.name=zr --set data.grad_accum=2 --set optim.zero=1 --set train.steps=10 > zr1.log
ls runs/zr/checkpoints/step-00000010/optimizer-dp1.safetensors > /dev/null
mpi 2 --set run.name=zr --set data.grad_accum=2 --set optim.zero=1 > zr2.log
grep -q "resumed from .*step-00000010" zr2.log || fail "zr did not resume"
exact z2 zr
mpi 2 --set run.name=zo --set data.grad_accum=2 --set optim.zero=1 --set train.steps=10 > zo1.log
"$BRAID" train c.yaml --set run.name=zo > zo2.log
grep -q "resumed from .*step-00000010" zo2.log || fail "zo did not resume"
same_losses one zo $DP_TOL

# Tensor parallelism: each rank's part quantised in its own blocks.
mpi 2 --set run.name=tp2 --set parallel.tp=2 > tp2.log
same_losses one tp2 $TP_TOL
mpi 2 --set run.name=tpr --set parallel.tp=2 --set train.steps=10 > tpr1.log
mpi 2 --set run.name=tpr --set parallel.tp=2 > tpr2.log
grep -q "resumed from .*step-00000010" tpr2.log || fail "tpr did not resume"
exact tp2 tpr
expect_fail "resume with parallel.tp=2" "$BRAID" train c.yaml --set run.name=tpr \
  --set train.steps=30 --set optim.decay_steps=30
# dp = 2 x tp = 2: ZeRO-1 equals plain DP, and resumes from its own pieces of the parts.
mpi 4 --set run.name=dt --set parallel.tp=2 --set data.grad_accum=2 > dt.log
mpi 4 --set run.name=dtz --set parallel.tp=2 --set data.grad_accum=2 --set optim.zero=1 \
  --set train.steps=10 > dtz1.log
mpi 4 --set run.name=dtz --set parallel.tp=2 --set data.grad_accum=2 --set optim.zero=1 > dtz2.log
grep -q "resumed from .*step-00000010" dtz2.log || fail "dtz did not resume"
exact dt dtz
same_losses one dt $TP_TOL
echo PASS
