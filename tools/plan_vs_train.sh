#!/usr/bin/env bash
# Compares `braid plan` step-time predictions (after --calibrate) with the steps `braid train`
# measures on this machine, for a few configs. Builds nothing.
#   tools/plan_vs_train.sh [BUILD_DIR]     (default: build/; needs BUILD_DIR/braid)
# For each config: calibrate (so the profile sees the same machine state as the run), predict,
# train a few steps, and compare. Measured = median of the log windows after the first
# (warm-up). Prints a table: config, predicted s/step, measured s/step, error %, and the load
# average when the run started. Takes about 3-4 minutes on 2 idle cores; on a shared machine
# run it when the load average is below the core count, or the numbers mean little.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ "$build" = /* ]] || build="$PWD/$build"
braid="$build/braid"
[[ -x "$braid" ]] || { echo "no braid binary at $braid; build it first (ninja -C $build braid)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$here"
load() { cut -d' ' -f1 /proc/loadavg; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
     "OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# One small corpus serves every config: the models' vocabularies (512 or 8192) only need to
# cover the data's 512 ids, and the FLOPs depend on the model's vocabulary, not the data's.
"$braid" prepare --input /usr/share/common-licenses --out "$tmp/data" --tokenizer bpe \
    --vocab-size 512 --force > "$tmp/prepare.log"

# config | steps | log interval (steps is a multiple of it; window 1 is warm-up)
runs=(
  "configs/bench_gpt2.yaml|8|2"
  "configs/quickstart.yaml|60|10"
  "configs/llama_small.yaml|24|4"
)
rows=()
for r in "${runs[@]}"; do
  IFS='|' read -r cfg steps li <<< "$r"
  name=$(basename "$cfg" .yaml)
  profile="$tmp/profile_$name.json"
  echo
  echo "== $cfg"
  "$braid" plan --calibrate --out "$profile" | grep -v '^wrote\|^(communication'
  sets=(--set "data.dir=$tmp/data" --set "train.steps=$steps" --set "train.log_interval=$li")
  pred=$("$braid" plan --config "$cfg" "${sets[@]}" --device-profile "$profile" --json |
         awk '/"step_seconds"/ {f = 1} f && /"total"/ {gsub(/[",]/, "", $2); print $2; exit}')
  "$braid" plan --config "$cfg" "${sets[@]}" --device-profile "$profile" |
      sed -n '/^step time/,/kernel-call/p' | grep -v ' 0.0000 '
  start_load=$(load)
  "$braid" train "$cfg" "${sets[@]}" --set "run.dir=$tmp/runs" --set "run.name=$name" \
      --set checkpoint.interval=0 --set checkpoint.resume=none --set train.sample_tokens=0 \
      --set train.eval_interval=0 > "$tmp/$name.log"
  windows=$(grep -o '"step_s":[^,}]*' "$tmp/runs/$name/metrics.jsonl" | tail -n +2 | cut -d: -f2)
  [[ -n "$windows" ]] || { echo "no step_s after the first window in $name" >&2; exit 1; }
  echo "measured s/step per log window after the first: $(echo $windows)"
  meas=$(echo "$windows" | sort -g | awk '{v[NR] = $1} END {printf "%.4f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
  rows+=("$(awk -v c="$cfg" -v p="$pred" -v m="$meas" -v l="$start_load" \
            'BEGIN {printf "| %s | %.4f | %.4f | %+.1f | %s |", c, p, m, 100 * (p - m) / m, l}')")
done

echo
echo "| config | predicted s/step | measured s/step | error % | load at start |"
echo "| --- | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
