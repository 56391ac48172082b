#!/usr/bin/env bash
# Packed JSONL samples (data.packing, document-masked attention, positions per sample) under
# tensor and pipeline parallelism against one rank, for one model family: tp=2 and pp=2 on
# 2 ranks (OMP_NUM_THREADS=1), 12 steps with the packed validation loss at steps 6 and 12.
#   mp_packing.sh <mpirun> <braid> <workdir> <gpt2|llama>
# Tolerance: 1e-6 relative on every step loss and validation loss, as tests/mpi/mp_train.sh
# (tensor parallelism sums partial products in another f32 order; a pipeline of untied Llama
# runs one rank's kernels in one rank's order and must match bit for bit).
source "$(dirname "$0")/mp_common.bash"  # FAMILY, $shape
packed_data 150
cat > p.yaml <<YAML
run: {name: one, dir: $WORK/runs}
model: {$shape, vocab_size: 256, context_length: 48, n_layer: 4, n_embd: 32, n_head: 4}
data: {dir: $WORK/sdata, micro_batch: 2, seq_len: 48, global_batch: 8, epochs: 1, seed: 3, prefetch: 2}
optim: {lr: 0.003, min_lr: 0.0003, warmup_steps: 2, decay: cosine, decay_steps: 12}
train: {steps: 12, log_interval: 1, eval_interval: 6, eval_batches: 4, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 0, keep_last: 1}
parallel: {timeout_s: 60}
YAML
mp() { local np=$1; shift; "$MPIRUN" --oversubscribe -np "$np" "$BRAID" train p.yaml "$@"; }
same_val() {  # same_val A B: validation losses within 1e-6 relative
  paste <(val_losses "$1") <(val_losses "$2") | awk -v a="$1" -v b="$2" '
    { n++; d = $1 - $2; if (d < 0) d = -d; rel = d / $2; if (rel > worst) worst = rel
      if (rel > 1e-6) bad = 1 }
    END { printf "%s vs %s: %d validation losses, worst relative difference %.3g (limit 1e-6)\n", a, b, n, worst
          exit bad || n < 2 }' || fail "$1 and $2 validation losses differ"
}

"$BRAID" train p.yaml > one.log
grep -q "(packed, " one.log || fail "the data is not packed: $(grep '^data:' one.log)"
grep -q "^validation: the samples of .* packed as training packs them" one.log ||
  fail "validation is not packed"
mp 2 --set run.name=tp2 --set parallel.tp=2 > tp2.log
grep -q "parallel: dp=1 tp=2 pp=1 over 2 ranks" tp2.log || fail "no tp layout line"
same_losses one tp2 1e-6
same_val one tp2
mp 2 --set run.name=pp2 --set parallel.pp=2 > pp2.log
grep -q "parallel: dp=1 tp=1 pp=2 over 2 ranks" pp2.log || fail "no pp layout line"
if [ "$FAMILY" = llama ]; then exact one pp2; else same_losses one pp2 1e-6; fi
same_val one pp2
# The packing matters: the same runs without it differ from the packed ones.
"$BRAID" train p.yaml --set run.name=unpacked --set data.packing=false > unpacked.log
[ "$(losses one | tail -1)" != "$(losses unpacked | tail -1)" ] || fail "packing changed nothing"
echo "ok: packed samples under tp=2 and pp=2 match one rank ($FAMILY)"
