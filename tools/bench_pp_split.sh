#!/usr/bin/env bash
# The default pipeline split (the LM head counted on the last stage) against the even split,
# on a GPT-2 whose head is heavy (8 blocks x 128 wide, vocabulary 8192: the head is ~4.6
# blocks of FLOPs), pp=2, 1f1b, 8 micro-batches of 2 x 128 tokens, one thread per rank;
# alternating runs of `braid train` (the machine's drift spreads over both).
#   tools/bench_pp_split.sh [build_dir] [pairs] [steps]     (from the repository root)
# Prints each run's split, mean tokens/s and mean measured bubble per stage over the steps
# after the first, then the means per split.
set -euo pipefail
build=$(realpath "${1:-build}") pairs=${2:-3} steps=${3:-6}
source "$(dirname "$0")/bench_train_common.bash"
bench_config "family: gpt2, vocab_size: 8192, context_length: 128, n_layer: 8, n_embd: 128, n_head: 4" \
  "micro_batch: 2, seq_len: 128, grad_accum: 8" "pp: 2"
run() {  # run NAME [--set ...]
  local name=$1; shift
  mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$build/braid" train c.yaml \
    --set run.name=$name "$@" > $name.log
  local split; split=$(grep -o 'blocks per stage \[[0-9, ]*\]' $name.log | grep -o '\[.*\]' | tr -d ' ')
  grep '"step_loss"' runs/$name/metrics.jsonl | tail -n +2 | awk -v n=$name -v s="$split" '
    { match($0, /"tokens_per_s":[0-9.e+-]+/); t += substr($0, RSTART + 15, RLENGTH - 15)
      match($0, /"bubble":\[[^]]*\]/); split(substr($0, RSTART + 10, RLENGTH - 11), b, ",")
      b0 += b[1]; b1 += b[2]; k++ }
    END { printf "%s split %s: %.0f tokens/s, bubble %.3f / %.3f\n", n, s, t / k, b0 / k, b1 / k }'
}
for i in $(seq "$pairs"); do
  run even_$i --set 'parallel.pp_split=[4,4]'
  run default_$i
done | tee results.txt
awk '{ k = ($1 ~ /^even/) ? "even" : "default"; t[k] += $4; n[k]++; s[k] = $3 }
  END { printf "mean tokens/s: even %s %.0f, default %s %.0f, ratio %.2f\n", s["even"], t["even"] / n["even"],
        s["default"], t["default"] / n["default"], (t["default"] / n["default"]) / (t["even"] / n["even"]) }' results.txt
