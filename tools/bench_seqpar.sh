#!/usr/bin/env bash
# Sequence parallelism on tp=2: peak activation memory and step time of `braid train` with
# parallel.sequence_parallel off and on, alternating runs (the machine's drift spreads over
# both), on a GPT-2 of 4 blocks x 256 wide, micro-batch 4 x 256 tokens, f32, no checkpointing.
#   tools/bench_seqpar.sh [build_dir] [pairs] [steps]     (from the repository root)
# Prints each run's rank-0 peak activation MiB (metrics.jsonl, the step's high-water mark of
# activation tensors) and mean step time over the steps after the first, then the ratios.
set -euo pipefail
build=$(realpath "${1:-build}") pairs=${2:-2} steps=${3:-6}
source "$(dirname "$0")/bench_train_common.bash"
bench_config "family: gpt2, vocab_size: 256, context_length: 256, n_layer: 4, n_embd: 256, n_head: 8" \
  "micro_batch: 4, seq_len: 256, grad_accum: 1" "tp: 2"
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
