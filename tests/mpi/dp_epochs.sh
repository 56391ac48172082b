#!/usr/bin/env bash
# data.global_batch, data.epochs and packing under data parallelism: packed JSONL samples over
# 2 epochs on 1 and 2 ranks give the same step losses (the ranks split each step's sequences);
# a run started on 1 rank resumes on 2 mid-epoch with the same global batch and matches the
# uninterrupted run; a global batch the layout cannot divide, and a resume that would change
# the batch, are clear errors.
#   dp_epochs.sh <mpirun> <braid> <workdir>
# Tolerance 1e-6 relative: the ranks' partial gradients are summed in another order (as in
# dp_train.sh); the first step's loss is exact.
source "$(dirname "$0")/dp_common.bash"
expect_fail() {
  local want=$1; shift
  local out rc
  set +e; out=$("$@" 2>&1); rc=$?; set -e
  [ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "expected a clean failure (exit $rc) of: $* ($out)"
  echo "$out" | grep -qF -- "$want" || fail "expected '$want' in: $out"
  echo "ok (exit $rc): $want"
}
packed_data 120
cat > e.yaml <<YAML
run: {name: e1, dir: $WORK/runs}
model: {family: llama, vocab_size: 256, context_length: 64, n_layer: 2, n_embd: 32, n_head: 4, n_kv_head: 2, ffn_hidden: 48}
data: {dir: $WORK/sdata, micro_batch: 2, seq_len: 64, global_batch: 4, epochs: 2, seed: 3, prefetch: 2}
optim: {lr: 0.003, warmup_steps: 1, decay: constant}
train: {log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 3, keep_last: 3, resume: auto}
parallel: {timeout_s: 30}
YAML
me() { local np=$1; shift; "$MPIRUN" --oversubscribe -np "$np" "$BRAID" train e.yaml "$@"; }
"$BRAID" train e.yaml > e1.log
grep -q "data: 108 samples per epoch in .* sequences of 64 tokens (packed" e1.log ||
  fail "no data line: $(grep data: e1.log)"
steps=$(sed -n 's/.*2 epochs = \([0-9]*\) steps of 4 sequences.*/\1/p' e1.log)
[ -n "$steps" ] || fail "no epoch length in: $(grep data: e1.log)"
[ "$(losses e1 | wc -l)" -eq "$steps" ] || fail "trained $(losses e1 | wc -l) steps, not $steps"
grep -q '"epoch":2' runs/e1/metrics.jsonl || fail "no epoch 2 in the metrics"
grep -q "| epoch 1 |" e1.log || fail "no epoch in the step line"
me 2 --set run.name=e2 > e2.log
same_losses e1 e2 1e-6
[ "$(losses e1 | head -1)" = "$(losses e2 | head -1)" ] || fail "step 1 is not exact"
# Resume mid-epoch on another rank count: 3 steps on one rank, the rest on two.
"$BRAID" train e.yaml --set run.name=r --set train.steps=3 > r1.log
me 2 --set run.name=r > r2.log
grep -q "resumed from" r2.log || fail "no resume: $(tail -3 r2.log)"
same_losses e1 r 1e-6
# Errors: a global batch the layout cannot divide; a resume that would change the batch.
expect_fail "data.global_batch 6 is not a multiple of data.micro_batch 4 x 2 data-parallel ranks = 8" \
  me 2 --set run.name=bad --set data.global_batch=6 --set data.micro_batch=4
[ ! -e runs/bad ] || fail "a refused layout left runs/bad behind"
"$BRAID" train e.yaml --set run.name=g --set data.global_batch=0 --set data.grad_accum=2 --set train.steps=3 > g1.log
expect_fail "it was trained with 4 sequences per step, and this layout gives 8" \
  me 2 --set run.name=g --set data.global_batch=0 --set data.grad_accum=2
echo "ok: global batch, epochs and packing under data parallelism"
