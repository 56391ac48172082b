# Shared by the tensor/pipeline `braid train` scripts (sourced): arguments, corpus, a 4-block
# model of the family in $4, and helpers.
#   <script> <mpirun> <braid> <workdir> <gpt2|llama>
source "$(dirname "$0")/dp_common.bash"
FAMILY=$4
if [ "$FAMILY" = llama ]; then
  shape="family: llama, n_kv_head: 2"
else
  shape="family: gpt2"
fi
# vocab_align 3: the 256-token vocabulary pads to 258 rows under tp=2, so padding is exercised.
cat > c.yaml <<YAML
run: {name: one, dir: $WORK/runs}
model: {$shape, vocab_size: 256, context_length: 16, n_layer: 4, n_embd: 32, n_head: 4}
data: {dir: $WORK/data, micro_batch: 2, seq_len: 16, grad_accum: 4, seed: 3, prefetch: 2}
optim: {lr: 0.003, min_lr: 0.0003, warmup_steps: 2, decay: cosine, decay_steps: 10}
train: {steps: 10, log_interval: 1, eval_interval: 5, eval_batches: 3, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 5, keep_last: 3, resume: auto}
parallel: {bucket_mb: 0.02, first_bucket_mb: 0.005, timeout_s: 60, vocab_align: 3}
YAML
TOL=1e-6
val_losses() { grep '"val_loss"' "runs/$1/metrics.jsonl" | sed 's/.*"val_loss":\([^,}]*\).*/\1/'; }
# Bad layouts: a clear error from every rank's job (expect_fail), non-zero, nothing hangs.
mpi_t() { timeout 120 "$MPIRUN" --oversubscribe -np "$1" "$BRAID" train c.yaml "${@:2}"; }
