#!/usr/bin/env bash
# Compares `braid plan` step-time predictions (after --calibrate) with the steps `braid train`
# measures on this machine, group by group, for a few configs. Builds nothing.
#   tools/plan_vs_train.sh [BUILD_DIR] [REPEATS]   (default: build/, 1; needs BUILD_DIR/braid)
#
# A shared or virtual machine's speed drifts over seconds to minutes, so each training run is
# bracketed by calibrations: calibrate, train config 1, calibrate, train config 2, calibrate, ...
# and config i is predicted from the mean of the profiles just before and just after it
# (`--device-profile before.json,after.json`); the predictions from each profile alone are
# printed too. Measured = mean step time of the log windows after the first (warm-up), from the
# run's metrics.jsonl, read by `braid plan --compare`, which also sets the measured kernel-group
# times beside the predicted ones. Takes about 7 minutes per repeat on 2 cores (a calibration
# is about a minute).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
repeats=${2:-1}
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

# config | steps | log interval (steps is a multiple of it; window 1 is warm-up). About 20-30 s
# of training each, so the mean spans several of the machine's speed swings.
runs=(
  "configs/bench_gpt2.yaml|12|2"
  "configs/quickstart.yaml|200|20"
  "configs/llama_small.yaml|60|6"
)
json_num() { grep -o "\"$1\": *[-0-9.eE+]*" | head -1 | sed 's/.*: *//'; }
rows=()
n=0
calibrate() { "$braid" plan --calibrate --out "$tmp/profile_$1.json" > "$tmp/calibrate_$1.log"; }
calibrate 0
for rep in $(seq 1 "$repeats"); do
  for r in "${runs[@]}"; do
    IFS='|' read -r cfg steps li <<< "$r"
    name=$(basename "$cfg" .yaml)
    before="$tmp/profile_$n.json"
    sets=(--set "data.dir=$tmp/data" --set "train.steps=$steps" --set "train.log_interval=$li")
    start_load=$(cut -d' ' -f1 /proc/loadavg)
    rm -rf "$tmp/runs"
    "$braid" train "$cfg" "${sets[@]}" --set "run.dir=$tmp/runs" --set "run.name=$name" \
        --set checkpoint.interval=0 --set checkpoint.resume=none --set train.sample_tokens=0 \
        --set train.eval_interval=0 > "$tmp/$name.log"
    n=$((n + 1))
    calibrate "$n"
    after="$tmp/profile_$n.json"
    echo
    echo "== repeat $rep: $cfg (load average at start $start_load)"
    "$braid" plan --config "$cfg" "${sets[@]}" --device-profile "$before,$after" \
        --compare "$tmp/runs/$name" | sed -n '/^predicted vs measured/,$p'
    pred() { "$braid" plan --config "$cfg" "${sets[@]}" --device-profile "$1" --json \
                 --compare "$tmp/runs/$name" | json_num predicted_step_s; }
    pb=$(pred "$before")
    pa=$(pred "$after")
    j=$("$braid" plan --config "$cfg" "${sets[@]}" --device-profile "$before,$after" --json \
        --compare "$tmp/runs/$name")
    pm=$(echo "$j" | json_num predicted_step_s)
    meas=$(echo "$j" | json_num measured_step_s)
    rows+=("$(awk -v c="$cfg" -v r="$rep" -v b="$pb" -v a="$pa" -v p="$pm" -v m="$meas" -v l="$start_load" \
              'BEGIN {printf "| %s | %d | %.4f | %.4f | %.4f | %.4f | %+.1f | %+.1f | %+.1f | %s |", c, r, b, a, p, m,
                      100 * (p - m) / m, 100 * (b - m) / m, 100 * (a - m) / m, l}')")
  done
done

echo
echo "| config | repeat | predicted, profile before | predicted, profile after | predicted, mean | measured s/step | error % (mean) | error % (before only) | error % (after only) | load at start |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
