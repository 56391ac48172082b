#!/usr/bin/env bash
# Compares `braid plan` step-time predictions (after --calibrate) with the steps `braid train`
# measures on this machine, for a few configs. Builds nothing.
#   tools/plan_vs_train.sh [BUILD_DIR]     (default: build/; needs BUILD_DIR/braid)
# Prints the calibration, then a table: config, predicted s/step, measured s/step, error %.
# The first log window of each run is skipped (warm-up). Takes about 2-4 minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ "$build" = /* ]] || build="$PWD/$build"
braid="$build/braid"
[[ -x "$braid" ]] || { echo "no braid binary at $braid; build it first (ninja -C $build braid)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$here"

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
     "OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# One small corpus serves every config: the models' vocabularies (512 or 8192) only need to
# cover the data's 512 ids, and the FLOPs depend on the model's vocabulary, not the data's.
"$braid" prepare --input /usr/share/common-licenses --out "$tmp/data" --tokenizer bpe \
    --vocab-size 512 --force > "$tmp/prepare.log"
"$braid" plan --calibrate --out "$tmp/profile.json"

# config | steps | log interval (steps is a multiple of it; window 1 is warm-up)
runs=(
  "configs/bench_gpt2.yaml|8|2"
  "configs/quickstart.yaml|60|15"
  "configs/llama_small.yaml|24|6"
)
rows=()
for r in "${runs[@]}"; do
  IFS='|' read -r cfg steps li <<< "$r"
  sets=(--set "data.dir=$tmp/data" --set "train.steps=$steps" --set "train.log_interval=$li")
  pred=$("$braid" plan --config "$cfg" "${sets[@]}" --device-profile "$tmp/profile.json" --json |
         awk '/"step_seconds"/ {f = 1} f && /"total"/ {gsub(/[",]/, "", $2); print $2; exit}')
  "$braid" plan --config "$cfg" "${sets[@]}" --device-profile "$tmp/profile.json" |
      sed -n '/^step time/,/element-wise/p'
  name=$(basename "$cfg" .yaml)
  "$braid" train "$cfg" "${sets[@]}" --set "run.dir=$tmp/runs" --set "run.name=$name" \
      --set checkpoint.interval=0 --set checkpoint.resume=none --set train.sample_tokens=0 \
      --set train.eval_interval=0 > "$tmp/$name.log"
  meas=$(grep -o '"step_s":[^,}]*' "$tmp/runs/$name/metrics.jsonl" | tail -n +2 | cut -d: -f2 |
         awk '{s += $1; n++} END {if (n) printf "%.4f", s / n}')
  [[ -n "$meas" ]] || { echo "no step_s after the first window in $name" >&2; exit 1; }
  rows+=("$(awk -v c="$cfg" -v p="$pred" -v m="$meas" \
            'BEGIN {printf "| %-26s | %9.4f | %9.4f | %+6.1f |", c, p, m, 100 * (p - m) / m}')")
done

echo
echo "| config                     | predicted s/step | measured s/step | error % |"
echo "| --- | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
