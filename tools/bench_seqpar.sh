#!/usr/bin/env bash
# Sequence parallelism on tp=2: peak activation memory and step time of `braid train` with
# parallel.sequence_parallel off and on, alternating runs (the machine's drift spreads over
# both), on a GPT-2 of 4 blocks x 256 wide, micro-batch 4 x 256 tokens, f32, no checkpointing.
#   tools/bench_seqpar.sh [build_dir] [pairs] [steps]     (from the repository root)
# Prints each run's rank-0 peak activation MiB (metrics.jsonl, the step's high-water mark of
# activation tensors) and mean step time over the steps after the first, then the ratios.
set -euo pipefail
build=$(realpath "${1:-build}") pairs=${2:-2} steps=${3:-6}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
work=$(mktemp -d /tmp/bench_seqpar.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
cd "$work"
mkdir corpus
cat /usr/share/common-licenses/* > corpus/a.txt 2>/dev/null || true
"$build/braid" prepare --input corpus --out data --tokenizer byte --val-fraction 0.05 > /dev/null
cat > c.yaml <<YAML
run: {name: x, dir: $work/runs}
model: {family: gpt2, vocab_size: 256, context_length: 256, n_layer: 4, n_embd: 256, n_head: 8}
data: {dir: $work/data, micro_batch: 4, seq_len: 256, grad_accum: 1, seed: 3}
optim: {lr: 0.001, warmup_steps: 1}
train: {steps: $steps, log_interval: 1, eval_interval: 0, sample_tokens: 0, peak_tflops: 1.0}
checkpoint: {interval: 0}
parallel: {tp: 2}
YAML
run() {  # run NAME SP
  mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$build/braid" train c.yaml \
    --set run.name=$1 --set parallel.sequence_parallel=$2 > $1.log
  python3 - "runs/$1/metrics.jsonl" "$1" <<'PY' || awk -v n="$1" '{print n, "(python3 missing)"}' /dev/null
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"step_loss"' in l]
act = max(r["peak_memory_mib"]["activations"] for r in rows)
t = [r["step_s"] for r in rows[1:]]
print(f"{sys.argv[2]}: peak activations {act:.2f} MiB, step {1000 * sum(t) / len(t):.1f} ms")
PY
}
for i in $(seq "$pairs"); do
  run off_$i false
  run on_$i true
done | tee results.txt
awk '/^off/ { a += $4; t += $7; n++ } /^on/ { b += $4; u += $7; m++ }
  END { printf "sequence parallel / without: activations %.3f, step time %.3f (tp=2, %d pairs)\n", (b / m) / (a / n), (u / m) / (t / n), n }' results.txt
